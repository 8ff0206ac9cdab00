// The upstream protocol: how a node's store proxy (proxy.h) carries its own ranks' TCPStore
// connections to node 0's store over one TCP connection (docs/tcpstore-protocol.md, section
// 12).  Both ends are gculaunch; no torch process ever speaks it.
//
// Why frames with stream ids: a TCPStore reply carries no request label, which is why torch
// gives every rank its own connection: one rank's blocking WAIT must not stall another's GET.
// Many ranks on one connection therefore need labels.  Every frame names its stream (one
// rank connection at the proxy), and node 0 keeps one store connection per stream, so each
// stream's requests and replies keep exactly the TCPStore order and semantics while streams
// never wait for each other.
//
// Handshake: the proxy connects to node 0's store port as a TCPStore v1 client, runs the job
// secret's handshake as node agents do when there is one (join_auth.h: node 0 proves the
// secret first, so a proxy never forwards a rank's bytes to a listener without it), then
// sends GET kUpstreamKey.
// Node 0 answers the blob kUpstreamOk; from then on both directions carry frames only.
//
// A frame: u8 type, u32 stream, u64 length (little-endian), then `length` bytes.
//   proxy -> node 0:  OPEN   length 0: a rank connected (node 0 binds the stream to the
//                            restart attempt current now, as it binds a direct connection);
//                     DATA   TCPStore request bytes of the stream, in the rank's own dialect,
//                            whole requests only: a frame never ends inside a request, and
//                            nothing else comes between the frames of one request;
//                     CLOSE  length 0: the rank's connection ended (its parked WAIT ends).
//   node 0 -> proxy:  DATA   reply and delivery bytes, exactly what a direct connection gets;
//                     CLOSE  length 0: node 0 closed the stream (the store asked for it, a
//                            new restart attempt, the connection cap): the proxy closes the
//                            rank's connection, which then fails as against a lost store.
// A stream is no more trusted than a rank's direct connection: the proxy's proof of the secret
// covers the upstream only.  A stream may prove the secret itself (the node's own agent does,
// through its proxy), answered by node 0 as on a direct connection.
// Either side drops frames for a stream it no longer knows (the other side may not have seen
// its CLOSE yet).  Anything else (an unknown type, OPEN of a known stream, a length on OPEN
// or CLOSE, a frame that breaks the whole-request rule) is a protocol error that ends the
// whole upstream connection.
//
// Bounds: FrameReader holds 13 header bytes and passes body bytes through as they arrive;
// UpstreamDemux decodes each stream with its own codec Decoder under the store's Limits, and
// because frames carry whole requests at most one request is ever partly received.
//
// No sockets, no Boost.  Thread safety: plain values used by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "rendezvous/codec.h"

namespace gculaunch::rendezvous {

/// The reserved key whose GET turns a store connection into an upstream connection.
inline constexpr std::string_view kUpstreamKey = "gculaunch/auth/upstream";
/// Node 0's answer to that GET when it accepts.
inline constexpr std::string_view kUpstreamOk = "upstream v1";

enum class FrameType : std::uint8_t { kOpen = 1, kData = 2, kClose = 3 };

inline constexpr std::size_t kFrameHeaderSize = 13;

/// Appends a frame header.
void AppendFrameHeader(std::string& out, FrameType type, std::uint32_t stream,
                       std::uint64_t length);
void AppendFrameHeader(Reply& out, FrameType type, std::uint32_t stream, std::uint64_t length);

/// Streaming frame parser: headers are buffered (13 bytes), body bytes are handed out as they
/// arrive, in as many pieces as the reads split them into.
class FrameReader {
 public:
  enum class Status : std::uint8_t {
    kNeedMore,  ///< all input consumed, no header or body bytes completed
    kHeader,    ///< a header completed: type(), stream(), left() describe the frame
    kBody,      ///< body() shows the next bytes of the current frame; Consume() takes them
    kBad,       ///< error() says why; every later call returns kBad
  };
  struct Step {
    Status status;
    std::size_t consumed;
  };

  /// Reads a header from `input`, or (inside a frame's body) shows the body bytes it holds
  /// without consuming them: the caller says with Consume how many it used.
  Step Next(std::span<const std::uint8_t> input);
  /// Takes `n` body bytes shown by the last kBody.  REQUIRES: n <= body().size().
  void Consume(std::size_t n);

  FrameType type() const { return type_; }
  std::uint32_t stream() const { return stream_; }
  /// Body bytes of the current frame not yet handed out.
  std::uint64_t left() const { return left_; }
  std::span<const std::uint8_t> body() const { return body_; }
  const std::string& error() const { return error_; }

 private:
  std::uint8_t header_[kFrameHeaderSize] = {};
  std::size_t have_ = 0;
  FrameType type_ = FrameType::kData;
  std::uint32_t stream_ = 0;
  std::uint64_t left_ = 0;
  std::span<const std::uint8_t> body_;
  std::string error_;
};

/// Node 0's side of one upstream connection: frames in, decoded requests per stream out.
class UpstreamDemux {
 public:
  /// What the demultiplexer reports; node 0's server implements it.
  class Handler {
   public:
    /// A new stream; false refuses it (the handler told the proxy; later frames are dropped).
    virtual bool OnOpen(std::uint32_t stream) = 0;
    /// One complete request of `stream` (may be moved from).
    virtual void OnRequest(std::uint32_t stream, Request& request) = 0;
    /// The proxy closed `stream`.
    virtual void OnClose(std::uint32_t stream) = 0;
    /// The stream's bytes broke the TCPStore protocol or a limit: the handler closes it (and
    /// tells the proxy); later frames of it are dropped.
    virtual void OnMalformed(std::uint32_t stream, const std::string& reason) = 0;

   protected:
    ~Handler() = default;
  };

  explicit UpstreamDemux(const Limits& limits);

  /// Consumes input until one request was handed to `handler`, the input ran out, or the
  /// connection broke the protocol (failed() then; error() says why).  Returns the bytes used.
  std::size_t Feed(std::span<const std::uint8_t> input, Handler& handler);
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }

  /// Node 0 closed `stream`: its state goes, and later frames for it are dropped.
  void Forget(std::uint32_t stream);
  /// Streams open now.
  std::size_t streams() const { return decoders_.size(); }
  /// Memory of the one request partly received (0 between requests).
  std::size_t buffered() const;

 private:
  /// Handles a completed header; false on a protocol error.
  bool OnHeader(Handler& handler);
  /// Feeds body bytes to the current stream's decoder; returns how many it used.
  std::size_t OnBody(std::span<const std::uint8_t> body, Handler& handler, bool& handed);
  void Fail(std::string reason);

  Limits limits_;
  FrameReader reader_;
  std::unordered_map<std::uint32_t, std::unique_ptr<Decoder>> decoders_;
  Decoder* current_ = nullptr;  ///< the stream the current DATA frame feeds; null: dropped
  /// A decoder Forget()ed while its request was being handled, freed at the next Feed.
  std::unique_ptr<Decoder> retired_;
  std::string error_;
};

}  // namespace gculaunch::rendezvous
