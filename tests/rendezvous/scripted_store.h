// ScriptedStore: a fake store on a thread of its own, for tests that count a client's round
// trips.  It accepts one connection and plays a script of steps: a step waits until it has
// decoded its number of requests, and only then writes its answer, in one write.  A client
// that waits for an answer between those requests (they were not pipelined) gets none: the
// step gives up after its deadline, the client's read fails, and the test sees the failure
// instead of hanging.  Header-only, no Catch (it runs off the test's thread).
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "rendezvous/codec.h"
#include "rendezvous/listener.h"

namespace gculaunch::rendezvous::testing {

class ScriptedStore {
 public:
  struct Step {
    std::size_t requests = 0;  ///< how many requests to decode before answering
    /// The bytes to send back, given what this step decoded.
    std::function<std::string(const std::vector<Request>&)> answer;
  };

  explicit ScriptedStore(std::vector<Step> steps,
                         std::chrono::milliseconds deadline = std::chrono::seconds(5))
      : steps_(std::move(steps)), deadline_(deadline) {
    auto listener = ListenSocket::Bind("127.0.0.1", 0);
    if (!listener.ok()) {
      failure_ = listener.error().what;
      return;
    }
    port_ = listener->port();
    listener_.emplace(std::move(*listener));
    thread_ = std::thread([this] { Play(); });
  }
  ~ScriptedStore() { Join(); }
  ScriptedStore(const ScriptedStore&) = delete;
  ScriptedStore& operator=(const ScriptedStore&) = delete;

  std::uint16_t port() const { return port_; }
  /// Waits for the script to end; then received() and failure() may be read.
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  /// What each step decoded (fewer entries when the script stopped early).
  const std::vector<std::vector<Request>>& received() const { return received_; }
  /// Why the script stopped early; "" when every step was answered.
  const std::string& failure() const { return failure_; }

 private:
  void Play() {
    pollfd p{listener_->fd(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(deadline_.count())) != 1) {
      failure_ = "nobody connected";
      return;
    }
    const int conn = ::accept4(listener_->fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) {
      failure_ = "accept failed";
      return;
    }
    Decoder decoder;
    std::string pending;  // bytes read but not yet decoded into a request
    for (const Step& step : steps_) {
      std::vector<Request>& got = received_.emplace_back();
      while (got.size() < step.requests) {
        if (!Decode(decoder, pending, got)) break;
        if (got.size() >= step.requests) break;
        if (!ReadSome(conn, pending)) {
          failure_ = "step " + std::to_string(received_.size()) + " decoded " +
                     std::to_string(got.size()) + " of " + std::to_string(step.requests) +
                     " requests before its deadline";
          ::close(conn);
          return;
        }
      }
      if (got.size() != step.requests) {
        failure_ = "step " + std::to_string(received_.size()) + " got too many or bad bytes";
        ::close(conn);
        return;
      }
      const std::string out = step.answer(got);
      if (::send(conn, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) {
        failure_ = "the answer could not be written";
        ::close(conn);
        return;
      }
    }
    // Until the client closes (its unread answers are not cut off by a reset).
    std::string rest;
    while (ReadSome(conn, rest)) rest.clear();
    ::close(conn);
  }

  // Decodes the whole requests in `pending`; false when the bytes are malformed.
  static bool Decode(Decoder& decoder, std::string& pending, std::vector<Request>& got) {
    std::string_view in(pending);
    while (true) {
      const Decoder::Step s = decoder.Decode(in);
      in.remove_prefix(s.consumed);
      if (s.status == Decoder::Status::kMalformed) return false;
      if (s.status != Decoder::Status::kRequest) break;
      got.push_back(decoder.request());
    }
    pending.clear();
    return true;
  }

  // One read within the deadline; false on timeout, error or end of stream.
  bool ReadSome(int conn, std::string& into) const {
    pollfd p{conn, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(deadline_.count())) != 1) return false;
    char buf[4096];
    const ssize_t n = ::read(conn, buf, sizeof buf);
    if (n <= 0) return false;
    into.append(buf, static_cast<std::size_t>(n));
    return true;
  }

  std::vector<Step> steps_;
  std::chrono::milliseconds deadline_;
  std::optional<ListenSocket> listener_;
  std::uint16_t port_ = 0;
  std::vector<std::vector<Request>> received_;
  std::string failure_;
  std::thread thread_;
};

/// Reply bytes: a blob (GET), a 4-byte word (PING's echo).
inline std::string Blob(std::string_view bytes) {
  std::string out;
  AppendBlob(out, bytes);
  return out;
}
inline std::string Word(std::uint32_t value) {
  std::string out;
  AppendU32(out, value);
  return out;
}

}  // namespace gculaunch::rendezvous::testing
