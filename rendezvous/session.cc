#include "rendezvous/session.h"

#include <spdlog/spdlog.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/write.hpp>

namespace gculaunch::rendezvous {
namespace {

constexpr std::size_t kInitialReadBuffer = 2048;
constexpr std::size_t kMaxReadBuffer = 256u << 10;

}  // namespace

Session::Session(boost::asio::ip::tcp::socket socket, ConnId id, std::string peer,
                 const Limits& limits, SessionOwner& owner, spdlog::logger& log)
    : socket_(std::move(socket)),
      id_(id),
      peer_(std::move(peer)),
      decoder_(limits),
      owner_(owner),
      log_(log),
      read_buf_(kInitialReadBuffer) {}

void Session::Start() {
  boost::system::error_code ignored;
  socket_.non_blocking(true, ignored);  // write_some in Flush must never block
  DoRead();
}

int Session::native_handle() { return socket_.is_open() ? socket_.native_handle() : -1; }

void Session::DoRead() {
  if (closed_ || closing_ || reading_ || !pending_.empty()) return;
  reading_ = true;
  socket_.async_read_some(
      boost::asio::buffer(read_buf_),
      [self = shared_from_this()](const boost::system::error_code& ec, std::size_t size) {
        self->OnRead(ec, size);
      });
}

void Session::OnRead(const boost::system::error_code& ec, std::size_t size) {
  reading_ = false;
  if (closed_) return;
  if (ec) {
    if (ec != boost::asio::error::eof && ec != boost::asio::error::operation_aborted) {
      log_.debug("connection {} from {}: read failed: {}", id_, peer_, ec.message());
    }
    End();
    return;
  }
  pending_ = std::span<const std::uint8_t>(read_buf_.data(), size);
  filled_buffer_ = size == read_buf_.size();
  Process();
}

void Session::Process() {
  while (true) {
    while (!closed_ && !closing_ && !pending_.empty() && queued() <= kOutputHighWater) {
      const auto step = decoder_.Decode(pending_);
      pending_ = pending_.subspan(step.consumed);
      if (step.status == Decoder::Status::kRequest) {
        owner_.OnRequest(*this, decoder_.request());
        continue;
      }
      if (step.status == Decoder::Status::kMalformed) {
        const Malformed& bad = decoder_.malformed();
        CloseAfterFlush("malformed input at byte " + std::to_string(bad.offset) + ": " +
                        bad.reason);
      }
      break;
    }
    if (closed_) return;
    Flush();
    if (closed_ || closing_ || pending_.empty()) break;
    // Decoding paused above the high-water mark.  If the output is still being written,
    // OnWrite resumes; if Flush sent it all at once, go on right away.
    if (writing_) return;
  }
  if (filled_buffer_ && read_buf_.size() < kMaxReadBuffer) read_buf_.resize(read_buf_.size() * 2);
  filled_buffer_ = false;
  DoRead();
}

void Session::Flush() {
  if (closed_ || writing_) return;
  if (!out_.empty()) {
    // Most replies fit in the socket buffer: send them right away.  An async_write would
    // send them just the same (Asio tries the send at once), but then also queue and run a
    // completion handler, which costs about as much as the request itself.
    boost::system::error_code ec;
    const std::size_t sent = socket_.write_some(boost::asio::buffer(out_), ec);
    if (ec && ec != boost::asio::error::would_block && ec != boost::asio::error::try_again) {
      log_.debug("connection {} from {}: write failed: {}", id_, peer_, ec.message());
      End();
      return;
    }
    out_.erase(0, sent);
  }
  if (out_.empty()) {
    if (closing_) End();
    return;
  }
  std::swap(out_, inflight_);
  out_.clear();
  writing_ = true;
  boost::asio::async_write(socket_, boost::asio::buffer(inflight_),
                           [self = shared_from_this()](const boost::system::error_code& ec,
                                                       std::size_t) { self->OnWrite(ec); });
}

void Session::OnWrite(const boost::system::error_code& ec) {
  writing_ = false;
  inflight_.clear();
  if (closed_) return;
  if (ec) {
    if (ec != boost::asio::error::operation_aborted) {
      log_.debug("connection {} from {}: write failed: {}", id_, peer_, ec.message());
    }
    End();
    return;
  }
  Flush();
  if (!pending_.empty()) {
    Process();  // decoding paused for flow control
  } else {
    DoRead();
  }
}

void Session::CloseAfterFlush(const std::string& reason) {
  if (closed_ || closing_) return;
  closing_ = true;
  log_.warn("closing connection {} from {}: {}", id_, peer_, reason);
  // A pending read (when called from outside OnRead) is cancelled by the close in End().
  if (!writing_) Flush();
}

void Session::Close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  socket_.close(ignored);
}

void Session::End() {
  if (closed_) return;
  Close();
  owner_.OnSessionEnd(*this);
}

}  // namespace gculaunch::rendezvous
