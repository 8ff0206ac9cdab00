#include "launcher/run/control_socket.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <sstream>

namespace gculaunch {

namespace asio = boost::asio;
using Local = asio::local::stream_protocol;

namespace {

constexpr size_t kMaxRequest = 256;
constexpr std::chrono::seconds kRequestTimeout{5};

// Served: the same user as gculaunch, or root.
bool PeerAllowed(int fd) {
  struct ucred cred {};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
  return cred.uid == 0 || cred.uid == ::geteuid();
}

// One connection: read a line, ask the handler, write the answer, close.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Local::socket socket, ControlSocket::Handler handler)
      : socket_(std::move(socket)), timer_(socket_.get_executor()), handler_(std::move(handler)) {}

  void Start() {
    auto self = shared_from_this();
    timer_.expires_after(kRequestTimeout);
    timer_.async_wait([self](const boost::system::error_code& ec) {
      if (!ec) self->Close();
    });
    asio::async_read_until(
        socket_, buffer_, '\n',
        [self](const boost::system::error_code& ec, size_t n) { self->OnLine(ec, n); });
  }

 private:
  void OnLine(const boost::system::error_code& ec, size_t n) {
    timer_.cancel();
    if (ec) {
      Close();
      return;
    }
    std::string line(asio::buffers_begin(buffer_.data()),
                     asio::buffers_begin(buffer_.data()) + static_cast<std::ptrdiff_t>(n - 1));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto self = shared_from_this();
    handler_(line, [self](std::string answer) { self->Answer(std::move(answer)); });
  }

  void Answer(std::string answer) {
    answer_ = std::move(answer);
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(answer_),
                      [self](const boost::system::error_code&, size_t) { self->Close(); });
  }

  void Close() {
    boost::system::error_code ignored;
    socket_.shutdown(Local::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  Local::socket socket_;
  asio::steady_timer timer_;
  ControlSocket::Handler handler_;  ///< wrapped: does nothing once the ControlSocket is gone
  asio::streambuf buffer_{kMaxRequest};
  std::string answer_;
};

}  // namespace

std::string ControlSocketName(pid_t pid) { return "gculaunch/" + std::to_string(pid); }

std::vector<int> ControlPidsFromNetUnix(const std::string& net_unix) {
  std::vector<int> pids;
  std::istringstream in(net_unix);
  std::string line;
  const std::string marker = "@gculaunch/";
  while (std::getline(in, line)) {
    const size_t at = line.rfind(' ');
    if (at == std::string::npos) continue;
    const std::string path = line.substr(at + 1);
    if (path.compare(0, marker.size(), marker) != 0) continue;
    const std::string digits = path.substr(marker.size());
    if (digits.empty() || digits.size() > 9 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    pids.push_back(std::stoi(digits));
  }
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  return pids;
}

Result<std::unique_ptr<ControlSocket>> ControlSocket::Listen(asio::io_context& io,
                                                             Handler handler) {
  const std::string name = ControlSocketName(::getpid());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    return Error{"cannot create the control socket: " + std::string(std::strerror(errno)),
                 "`gculaunch stacks` will not reach this launch; check the process limits"};
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  // Abstract: a leading NUL, then the name, without a terminator.
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, 16) != 0) {
    const int err = errno;
    ::close(fd);
    return Error{"cannot listen on the control socket @" + name + ": " + std::strerror(err),
                 "`gculaunch stacks` will not reach this launch"};
  }
  std::unique_ptr<ControlSocket> socket(new ControlSocket(io, std::move(handler), name));
  boost::system::error_code ec;
  socket->acceptor_.assign(Local(), fd, ec);
  if (ec) {
    ::close(fd);
    return Error{"cannot use the control socket @" + name + ": " + ec.message(),
                 "`gculaunch stacks` will not reach this launch"};
  }
  socket->Accept();
  return socket;
}

ControlSocket::ControlSocket(asio::io_context& io, Handler handler, std::string name)
    : handler_(std::move(handler)), name_(std::move(name)), acceptor_(io) {}

ControlSocket::~ControlSocket() { Stop(); }

void ControlSocket::Stop() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
}

void ControlSocket::Accept() {
  acceptor_.async_accept(
      lifetime_.Wrap([this](const boost::system::error_code& ec, Local::socket peer) {
        if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
        if (!ec) {
          const int fd = peer.native_handle();
          ::fcntl(fd, F_SETFD, FD_CLOEXEC);
          if (PeerAllowed(fd)) {
            ControlSocket::Handler handler =
                lifetime_.Wrap([this](const std::string& command, Reply reply) {
                  handler_(command, std::move(reply));
                });
            std::make_shared<Session>(std::move(peer), std::move(handler))->Start();
          }
        }
        Accept();
      }));
}

}  // namespace gculaunch
