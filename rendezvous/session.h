// Session: one accepted TCP connection of the store server.
//
// A session only glues bytes to the codec: it reads whatever the socket has, feeds it to its
// Decoder, hands every complete Request to its SessionOwner (the server, which runs the
// Store), and writes the output the owner appended, batching all replies produced by one
// read into one write.  Output is a Reply (codec.h): the session's own bytes and stored
// values shared with the store, sent with gather I/O.  It is sent at once with a non-blocking
// send; only what the socket buffer cannot take goes out through an asynchronous write.  A
// malformed stream, or a close asked for by the store, ends only this session: one log line
// names the peer and the reason, queued output is flushed, the socket is closed.  Other
// sessions and their parked WAITs are untouched.
//
// Flow control: while more than kOutputHighWater bytes wait to be written, the session stops
// decoding (the rest of its last read stays in the read buffer) and reading, so a client that
// pipelines requests (say, many GETs of a big value) without reading the replies cannot grow
// the server's memory beyond that bound plus one reply.
//
// Bounds (docs/tcpstore-protocol.md, section 6.1).  Deliveries (a woken WAIT, a watch
// event) are appended whatever is queued: a watcher cannot be back-pressured without
// stalling the writer.  So whenever more than SessionBounds::max_queued bytes wait to be
// sent, replies and deliveries alike, the session closes itself with one warning.  And every
// session charges what it holds to the server's BufferBudget: the request it is decoding
// (partial frames included), the undecoded rest of its last read and the bytes of its own
// output, plus, counted once over all sessions, the stored values its output shares.  When
// a session's charge takes the budget past its limit it asks its owner (OnOverBudget) to
// shed connections.
//
// Ownership: sessions are std::shared_ptr; every pending handler holds one, so a session
// lives until its last handler ran.  The owner keeps a registry of live sessions.  A session
// calls its owner only while it is open; once closed (by the owner through Close(), or by
// itself, after which it calls OnSessionEnd exactly once) it never touches the owner again,
// so the owner may be gone by the time late handlers run.
//
// Threading: one io_context thread; all callbacks style (no coroutines in this module).
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rendezvous/codec.h"
#include "rendezvous/store.h"

namespace spdlog {
class logger;
}

namespace gculaunch::rendezvous {

class Session;

/// The memory all sessions of one server hold, against one limit.  Single-threaded.
struct BufferBudget {
  explicit BufferBudget(std::size_t max = kDefaultMaxBuffered) : limit(max) {}
  std::size_t limit;
  std::size_t charged = 0;  ///< request bytes and own output bytes of every session
  ValueLedger values;       ///< stored values shared by queued output, each counted once
  std::size_t total() const { return charged + values.bytes(); }
  bool over() const { return total() > limit; }
};

/// Per-session bounds.
struct SessionBounds {
  std::size_t max_queued = kDefaultMaxQueued;  ///< unsent output bytes; more closes
  std::shared_ptr<BufferBudget> budget;        ///< shared by the server's sessions; null: own
};

/// What a Session needs from the server that owns it.
class SessionOwner {
 public:
  /// Handles one request of `session`: appends its reply to session.output() and may ask
  /// the session to close.  `request` may be moved from.
  virtual void OnRequest(Session& session, Request& request) = 0;
  /// The session ended by itself (peer closed, I/O error, malformed input, store close).
  /// Called once; the owner drops it from its registry and the store.
  virtual void OnSessionEnd(Session& session) = 0;
  /// Logs that `session` is being closed for `reason` (a warning; the owner may rate-limit).
  virtual void WarnClose(const Session& session, const std::string& reason) = 0;
  /// The budget is over its limit after `session` grew; the owner sheds connections.
  virtual void OnOverBudget() = 0;
  /// The bytes of an upgraded session (Session::Upgrade), instead of decoded requests:
  /// returns how many it used (it may stop early, e.g. after one request, so that output
  /// stays under the high-water mark), at least one unless it closed the session.
  virtual std::size_t OnRaw(Session& session, std::span<const std::uint8_t> bytes) {
    static_cast<void>(session);
    return bytes.size();
  }
  /// Request bytes the owner holds for an upgraded session (charged to the budget with it).
  virtual std::size_t RawBuffered(const Session& session) const {
    static_cast<void>(session);
    return 0;
  }

 protected:
  ~SessionOwner() = default;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  /// Stop reading while more than this many output bytes are queued.
  static constexpr std::size_t kOutputHighWater = 1u << 20;

  /// `socket` must be open and connected; `peer` is "address:port" for log lines.
  Session(boost::asio::ip::tcp::socket socket, ConnId id, std::string peer, const Limits& limits,
          SessionOwner& owner, spdlog::logger& log, SessionBounds bounds = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Starts the read loop.
  void Start();
  /// From now on (the rest of the current read included) the bytes read go to the owner's
  /// OnRaw, not to the TCPStore decoder: an upstream connection (upstream.h).  With `paced`
  /// the owner is handed bytes only while the output is under kOutputHighWater (node 0, whose
  /// replies a slow proxy must not pile up); without, always (the proxy, which must keep
  /// reading node 0's replies however much it still has to send, or the two would wait on
  /// each other).
  void Upgrade(bool paced);
  /// The dialect of the TCPStore connection, once its first bytes decided it.
  std::optional<Dialect> dialect() const { return decoder_.dialect(); }

  /// Output not yet handed to the socket; the owner appends replies and deliveries here and
  /// then calls Flush().
  Reply& output() { return out_; }
  /// Checks the bounds, then starts writing queued output unless a write is in flight.
  void Flush();

  /// Logs `reason` once (through the owner's WarnClose), stops reading, flushes queued
  /// output, closes the socket and calls OnSessionEnd.
  void CloseAfterFlush(const std::string& reason);
  /// Closes at once, dropping queued output, without calling the owner (which asked).
  void Close();
  /// Bytes unsent (the output's wire size, shared values in full).
  std::size_t queued() const { return out_.size() + inflight_size_; }
  /// What the session holds: request bytes, read buffer and unsent output (wire size).  The
  /// owner sheds the largest first.
  std::size_t footprint() const { return RequestBytes() + queued(); }

  ConnId id() const { return id_; }
  const std::string& peer() const { return peer_; }
  bool closed() const { return closed_; }
  /// The I/O error that ended the session ("Connection timed out", "Connection reset by
  /// peer"); empty while open, and after the peer closed its end or this side closed.
  const std::string& error() const { return error_; }
  /// The socket's fd, or -1 once closed.
  int native_handle();

 private:
  void DoRead();
  void OnRead(const boost::system::error_code& ec, std::size_t size);
  /// Decodes and handles the unprocessed bytes of the last read, up to the high water mark.
  void Process();
  void OnWrite(const boost::system::error_code& ec);
  /// Closes and tells the owner (the session ended by itself).
  void End();
  /// Updates this session's charge to the budget; false when the session closed itself
  /// (its output passed max_queued) or the owner shed it.
  bool Account();
  /// Request bytes held: the request being decoded and the undecoded rest of the last read.
  /// (The read buffer itself, at most 256 KiB, is bounded per connection and not counted.)
  std::size_t RequestBytes() const {
    return decoder_.buffered() + pending_.size() + (raw_ ? owner_.RawBuffered(*this) : 0);
  }
  /// Hands pending bytes to the owner (an upgraded session); false when it took none.
  bool ProcessRaw();
  /// Unpins and forgets the output of the write that completed (or was aborted).
  void ReleaseInflight();

  boost::asio::ip::tcp::socket socket_;
  ConnId id_;
  std::string peer_;
  std::string error_;  ///< see error()
  Decoder decoder_;
  SessionOwner& owner_;
  spdlog::logger& log_;

  std::vector<std::uint8_t> read_buf_;     ///< grows (to 256 KiB) while reads fill it
  std::span<const std::uint8_t> pending_;  ///< bytes of the last read not yet decoded
  bool filled_buffer_ = false;             ///< the last read filled read_buf_
  SessionBounds bounds_;
  Reply out_;                                   ///< queued output, not yet handed to the socket
  std::vector<Reply::Piece> inflight_;          ///< output of the write in flight (pinned)
  std::size_t inflight_size_ = 0;               ///< its bytes
  std::size_t inflight_own_ = 0;                ///< its own (unshared) bytes
  bool inflight_pinned_ = false;                ///< its shared values are still pinned
  std::vector<boost::asio::const_buffer> iov_;  ///< gather list, reused
  std::size_t charged_ = 0;                     ///< what this session charged to the budget
  bool reading_ = false;                        ///< a read is pending
  bool writing_ = false;                        ///< a write is pending
  bool closing_ = false;                        ///< CloseAfterFlush was called: no more reads
  bool raw_ = false;                            ///< Upgrade was called
  bool paced_ = true;                           ///< see Upgrade
  bool closed_ = false;
};

}  // namespace gculaunch::rendezvous
