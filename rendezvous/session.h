// Session: one accepted TCP connection of the store server.
//
// A session only glues bytes to the codec: it reads whatever the socket has, feeds it to its
// Decoder, hands every complete Request to its SessionOwner (the server, which runs the
// Store), and writes the output the owner appended, batching all replies produced by one
// read into one write.  Output is sent at once with a non-blocking send; only what the
// socket buffer cannot take goes out through an asynchronous write.  A malformed stream, or a close
// asked for by the store, ends only this session: one log line names the peer and the reason,
// queued output is flushed, the socket is closed.  Other sessions and their parked WAITs are
// untouched.
//
// Flow control: while more than kOutputHighWater bytes wait to be written, the session stops
// decoding (the rest of its last read stays in the read buffer) and reading, so a client that
// pipelines requests (say, many GETs of a big value) without reading the replies cannot grow
// the server's memory beyond that bound plus one reply.
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

/// What a Session needs from the server that owns it.
class SessionOwner {
 public:
  /// Handles one request of `session`: appends its reply to session.output() and may ask
  /// the session to close.  `request` may be moved from.
  virtual void OnRequest(Session& session, Request& request) = 0;
  /// The session ended by itself (peer closed, I/O error, malformed input, store close).
  /// Called once; the owner drops it from its registry and the store.
  virtual void OnSessionEnd(Session& session) = 0;

 protected:
  ~SessionOwner() = default;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  /// Stop reading while more than this many output bytes are queued.
  static constexpr std::size_t kOutputHighWater = 1u << 20;

  /// `socket` must be open and connected; `peer` is "address:port" for log lines.
  Session(boost::asio::ip::tcp::socket socket, ConnId id, std::string peer, const Limits& limits,
          SessionOwner& owner, spdlog::logger& log);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Starts the read loop.
  void Start();

  /// Output not yet handed to the socket; the owner appends replies and deliveries here and
  /// then calls Flush().
  std::string& output() { return out_; }
  /// Starts writing queued output unless a write is in flight.
  void Flush();

  /// Logs `reason` once (warning: "closing connection ..."), stops reading, flushes queued
  /// output, closes the socket and calls OnSessionEnd.
  void CloseAfterFlush(const std::string& reason);
  /// Closes at once, dropping queued output, without calling the owner (which asked).
  void Close();

  ConnId id() const { return id_; }
  const std::string& peer() const { return peer_; }
  bool closed() const { return closed_; }
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
  std::size_t queued() const { return out_.size() + inflight_.size(); }

  boost::asio::ip::tcp::socket socket_;
  ConnId id_;
  std::string peer_;
  Decoder decoder_;
  SessionOwner& owner_;
  spdlog::logger& log_;

  std::vector<std::uint8_t> read_buf_;     ///< grows (to 256 KiB) while reads fill it
  std::span<const std::uint8_t> pending_;  ///< bytes of the last read not yet decoded
  bool filled_buffer_ = false;             ///< the last read filled read_buf_
  std::string out_;                        ///< queued output, not yet handed to the socket
  std::string inflight_;                   ///< output of the write in flight
  bool reading_ = false;                   ///< a read is pending
  bool writing_ = false;                   ///< a write is pending
  bool closing_ = false;                   ///< CloseAfterFlush was called: no more reads
  bool closed_ = false;
};

}  // namespace gculaunch::rendezvous
