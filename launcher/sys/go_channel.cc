#include "launcher/sys/go_channel.h"

#include <sys/socket.h>

#include <boost/asio/post.hpp>
#include <cerrno>

namespace gculaunch::sys {

Result<std::pair<UniqueFd, UniqueFd>> MakeGoSocketPair() {
  int fds[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return SysError("cannot make a standby's stdin (socketpair)", errno);
  }
  return std::pair{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

Result<size_t> WriteSomeNow(int fd, std::string_view data) {
  while (true) {
    // MSG_NOSIGNAL: a standby that closed its end is an error here, never a SIGPIPE.
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return size_t{0};
    return SysError("write", errno);
  }
}

Result<std::string> ReadSomeNow(int fd, size_t max) {
  std::string buffer(max, '\0');
  while (true) {
    const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
    if (n > 0) {
      buffer.resize(static_cast<size_t>(n));
      return buffer;
    }
    if (n == 0 && max > 0) return Error{"end of file", ""};
    if (n == 0) return std::string();
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return std::string();
    return SysError("read", errno);
  }
}

GoChannel::GoChannel(boost::asio::io_context& io, UniqueFd fd)
    : socket_(io, fd.Release()), deadline_(io) {}

GoChannel::~GoChannel() { lifetime_.Expire(); }

void GoChannel::Go(std::string message, std::chrono::milliseconds bound,
                   std::function<void(Status)> done) {
  message_ = std::move(message);
  bound_ = bound;
  done_ = std::move(done);
  deadline_.expires_after(bound);
  deadline_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
    if (!ec) Finish(Error{Late(), ""});
  }));
  // Posted, so that `done` never runs inside Go() (a socket already closed fails at once).
  boost::asio::post(socket_.get_executor(), lifetime_.Wrap([this] { WriteMore(); }));
}

bool GoChannel::ConfirmedNow() {
  if (answer_.size() < kGoConfirmation.size()) {
    auto got = ReadSomeNow(socket_.native_handle(), kGoConfirmation.size() - answer_.size());
    if (got.ok()) answer_ += *got;
  }
  return answer_ == kGoConfirmation;
}

// As much of the message as the socket takes now; then a wait until it takes more.
void GoChannel::WriteMore() {
  if (!done_) return;
  while (written_ < message_.size()) {
    auto n = WriteSomeNow(socket_.native_handle(), std::string_view(message_).substr(written_));
    if (!n.ok()) return Finish(Error{"closed its stdin before it took the go", ""});
    if (*n == 0) {
      socket_.async_wait(boost::asio::posix::stream_descriptor::wait_write,
                         lifetime_.Wrap([this](const boost::system::error_code& ec) {
                           if (!ec) WriteMore();
                         }));
      return;
    }
    written_ += *n;
  }
  // End of file: the standby's read loop ends and it sets the environment.
  if (::shutdown(socket_.native_handle(), SHUT_WR) != 0) {
    return Finish(Error{"closed its stdin before it took the go", ""});
  }
  AwaitAnswer();
}

void GoChannel::AwaitAnswer() {
  socket_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                     lifetime_.Wrap([this](const boost::system::error_code& ec) {
                       if (!ec) ReadAnswer();
                     }));
}

void GoChannel::ReadAnswer() {
  if (!done_) return;
  auto got = ReadSomeNow(socket_.native_handle(), kGoConfirmation.size() - answer_.size());
  if (!got.ok()) return Finish(Error{"closed its stdin before it confirmed the go", ""});
  answer_ += *got;
  if (kGoConfirmation.substr(0, answer_.size()) != answer_) {
    return Finish(Error{"answered the go with something other than its confirmation", ""});
  }
  if (answer_.size() == kGoConfirmation.size()) return Finish(OkStatus());
  AwaitAnswer();
}

void GoChannel::Finish(Status status) {
  if (!done_) return;
  deadline_.cancel();
  socket_.cancel();
  auto done = std::move(done_);
  done_ = nullptr;
  done(std::move(status));
}

std::string GoChannel::Late() const {
  const std::string within = " within " + std::to_string(bound_.count()) + " ms";
  if (written_ < message_.size()) {
    return "did not read its go message" + within + " (its stdin stayed full)";
  }
  return "did not confirm the go" + within;
}

}  // namespace gculaunch::sys
