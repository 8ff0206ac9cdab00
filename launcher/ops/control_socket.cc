#include "launcher/ops/control_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <tuple>

#include "launcher/sys/held_dir.h"

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
using Dispatcher = std::function<void(const std::string& line, ControlSocket::Reply reply)>;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Local::socket socket, Dispatcher handler)
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
  Dispatcher handler_;  ///< wrapped: does nothing once the ControlSocket is gone
  asio::streambuf buffer_{kMaxRequest};
  std::string answer_;
};

std::vector<std::string> SplitWords(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  std::string word;
  while (in >> word) words.push_back(word);
  return words;
}

std::string SafeRunId(const std::string& run_id) {
  std::string safe = run_id.substr(0, 40);
  for (char& c : safe) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    if (!keep) c = '_';
  }
  return safe.empty() ? "_" : safe;
}

bool AllDigits(const std::string& text) {
  return !text.empty() && text.size() <= 9 &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A socket file that is ours (only those are removed when stale).
bool OwnSocketFile(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && st.st_uid == ::geteuid();
}

// Fills a sockaddr_un for `path`; false when it does not fit.
bool MakeAddress(const std::string& path, sockaddr_un* addr, socklen_t* len) {
  if (path.empty() || path.size() >= sizeof addr->sun_path) return false;
  *addr = sockaddr_un{};
  addr->sun_family = AF_UNIX;
  std::memcpy(addr->sun_path, path.data(), path.size());
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
  return true;
}

// A connected socket to `path`, or -1 with errno set.
int Connect(const std::string& path) {
  sockaddr_un addr{};
  socklen_t len = 0;
  if (!MakeAddress(path, &addr, &len)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

std::string NetNamespace(const std::string& pid) {
  std::error_code ec;
  const auto target = std::filesystem::read_symlink("/proc/" + pid + "/ns/net", ec);
  return ec ? std::string() : target.string();
}

std::string Describe(const ControlEndpoint& e) {
  return "run " + e.run_id + " node " + std::to_string(e.node_rank) + " pid " +
         std::to_string(e.pid);
}

}  // namespace

std::string ControlDirPath(const std::string& xdg_runtime_dir, uid_t uid) {
  const std::string private_dir = sys::PrivateRuntimeDir(xdg_runtime_dir, uid);
  if (!private_dir.empty()) return private_dir + "/gculaunch";
  return "/tmp/gculaunch-" + std::to_string(uid);
}

Status CheckControlDir(const std::string& dir, bool create) {
  if (create && ::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Error{"cannot create the control directory " + dir + ": " + std::strerror(errno),
                 "make its parent writable, or set XDG_RUNTIME_DIR to a directory of yours"};
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    return Error{"cannot use the control directory " + dir + ": " + std::strerror(errno),
                 "start a job first (it creates the directory), or check the path"};
  }
  // In sticky /tmp only its owner (or root) can remove another user's entry.
  const std::string fix =
      st.st_uid == ::geteuid()
          ? "remove it (rm -rf " + dir + ") and start the job again"
          : std::string("ask root to remove it, or set XDG_RUNTIME_DIR to a directory of yours");
  if (S_ISLNK(st.st_mode)) {
    return Error{"the control directory " + dir + " is a symbolic link, not a directory", fix};
  }
  if (!S_ISDIR(st.st_mode))
    return Error{"the control directory " + dir + " is not a directory", fix};
  if (st.st_uid != ::geteuid()) {
    return Error{"the control directory " + dir + " belongs to uid " + std::to_string(st.st_uid) +
                     ", not to this user (uid " + std::to_string(::geteuid()) + ")",
                 fix};
  }
  if ((st.st_mode & 07777) != 0700) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Error{"the control directory " + dir + " has mode " + mode + ", not 0700",
                 "chmod 700 " + dir};
  }
  return OkStatus();
}

bool ControlDirOfAnotherUser(const std::string& dir) {
  struct stat st {};
  return ::lstat(dir.c_str(), &st) == 0 && st.st_uid != ::geteuid();
}

Result<std::string> MakePrivateControlDir(const std::string& parent, uid_t uid) {
  std::string pattern = parent + "/gculaunch-" + std::to_string(uid) + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    return Error{
        "cannot create a private control directory in " + parent + ": " + std::strerror(errno),
        "set XDG_RUNTIME_DIR to a directory of yours"};
  }
  return pattern;
}

std::vector<std::string> PrivateControlDirs(const std::string& parent, uid_t uid) {
  const std::string prefix = "gculaunch-" + std::to_string(uid) + "-";
  std::vector<std::string> dirs;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(parent, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string dir = parent + "/" + name;
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (st.st_uid != ::geteuid() || (st.st_mode & 07777) != 0700) continue;
    dirs.push_back(dir);
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

std::string ControlSocketFileName(const std::string& run_id, int node_rank, pid_t pid) {
  return SafeRunId(run_id) + "-n" + std::to_string(node_rank) + "-" + std::to_string(pid) + ".sock";
}

Status CheckSocketPathLength(const std::string& path) {
  constexpr size_t kMax = sizeof(sockaddr_un::sun_path) - 1;
  if (path.size() <= kMax) return OkStatus();
  return Error{"the control socket path " + path + " is " + std::to_string(path.size()) +
                   " bytes, longer than a Unix socket allows (" + std::to_string(kMax) + ")",
               "set XDG_RUNTIME_DIR to a shorter directory (or unset it to use /tmp), or give a "
               "shorter --rdzv-id"};
}

std::optional<ControlEndpoint> ParseControlSocketName(const std::string& dir,
                                                      const std::string& file_name) {
  const std::string suffix = ".sock";
  if (file_name.size() <= suffix.size() ||
      file_name.compare(file_name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return std::nullopt;
  }
  const std::string stem = file_name.substr(0, file_name.size() - suffix.size());
  const size_t pid_at = stem.rfind('-');
  if (pid_at == std::string::npos || !AllDigits(stem.substr(pid_at + 1))) return std::nullopt;
  const size_t node_at = stem.rfind("-n", pid_at == 0 ? 0 : pid_at - 1);
  if (node_at == std::string::npos || node_at == 0) return std::nullopt;
  const std::string node = stem.substr(node_at + 2, pid_at - node_at - 2);
  if (!AllDigits(node)) return std::nullopt;
  ControlEndpoint e;
  e.path = dir + "/" + file_name;
  e.run_id = stem.substr(0, node_at);
  e.node_rank = std::stoi(node);
  e.pid = std::stoi(stem.substr(pid_at + 1));
  return e;
}

std::vector<ControlEndpoint> ListControlEndpoints(const std::string& dir) {
  std::vector<ControlEndpoint> found;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    auto e = ParseControlSocketName(dir, it->path().filename().string());
    if (!e) continue;
    const int fd = Connect(e->path);
    if (fd < 0) {
      // Refused: nobody listens any more (a launch killed before its guardian ran).
      if ((errno == ECONNREFUSED || errno == ENOENT) && OwnSocketFile(e->path)) {
        ::unlink(e->path.c_str());
      }
      continue;
    }
    ::close(fd);
    found.push_back(std::move(*e));
  }
  std::sort(found.begin(), found.end(), [](const ControlEndpoint& a, const ControlEndpoint& b) {
    return std::tie(a.run_id, a.node_rank, a.pid) < std::tie(b.run_id, b.node_rank, b.pid);
  });
  return found;
}

Result<ControlEndpoint> SelectControlEndpoint(const std::vector<ControlEndpoint>& all,
                                              const ControlSelector& selector) {
  std::vector<ControlEndpoint> match;
  const std::string run_id = selector.run_id.empty() ? "" : SafeRunId(selector.run_id);
  for (const ControlEndpoint& e : all) {
    if (!run_id.empty() && e.run_id != run_id) continue;
    if (selector.node_rank >= 0 && e.node_rank != selector.node_rank) continue;
    if (selector.pid != 0 && e.pid != selector.pid) continue;
    match.push_back(e);
  }
  if (match.empty()) {
    return Error{all.empty() ? "no running gculaunch job of this user was found"
                             : "no running gculaunch job matches --job/--node/--pid",
                 all.empty() ? "run it on the node where the job runs, as the job's user"
                             : "run without --job/--node/--pid to list the jobs"};
  }
  if (match.size() == 1) return match.front();
  const std::string own = NetNamespace("self");
  std::vector<ControlEndpoint> local;
  for (const ControlEndpoint& e : match) {
    if (!own.empty() && NetNamespace(std::to_string(e.pid)) == own) local.push_back(e);
  }
  if (local.size() == 1) return local.front();
  std::string list;
  for (const ControlEndpoint& e : match) list += (list.empty() ? "" : "; ") + Describe(e);
  return Error{std::to_string(match.size()) + " gculaunch jobs run here: " + list,
               "choose one with --job RUN_ID, --node N or --pid PID"};
}

Result<ControlEndpoint> FindControlEndpoint(const std::string& xdg_runtime_dir,
                                            const ControlSelector& selector,
                                            const std::string& private_parent) {
  std::vector<std::string> dirs = {ControlDirPath(xdg_runtime_dir, ::geteuid())};
  if (const std::string plain = ControlDirPath("", ::geteuid()); plain != dirs.front()) {
    dirs.push_back(plain);
  }
  std::vector<ControlEndpoint> all;
  for (const std::string& dir : dirs) {
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0 && errno == ENOENT) continue;
    if (ControlDirOfAnotherUser(dir)) continue;  // squatted: the launches use private ones
    if (Status checked = CheckControlDir(dir, false); !checked.ok()) return checked.error();
    for (ControlEndpoint& e : ListControlEndpoints(dir)) all.push_back(std::move(e));
  }
  for (const std::string& dir : PrivateControlDirs(private_parent, ::geteuid())) {
    for (ControlEndpoint& e : ListControlEndpoints(dir)) all.push_back(std::move(e));
  }
  return SelectControlEndpoint(all, selector);
}

Result<std::string> ControlRequest(const std::string& path, const std::string& line,
                                   std::chrono::milliseconds timeout) {
  const int fd = Connect(path);
  if (fd < 0) {
    return Error{"cannot reach the gculaunch at " + path + ": " + std::strerror(errno),
                 "check that the job is still running"};
  }
  const std::string request = line + "\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return Error{"cannot send to the gculaunch at " + path, "check that it is still running"};
  }
  std::string answer;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[65536];
  for (int rounds = 0; rounds < 1000000; ++rounds) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      ::close(fd);
      return Error{"the gculaunch at " + path + " did not answer within " +
                       std::to_string(timeout.count() / 1000) + " s",
                   "try again, or raise --timeout"};
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000))) <= 0) continue;
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    answer.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  if (answer.empty()) {
    return Error{"the gculaunch at " + path + " closed the connection without an answer",
                 "run it as the user that started the job, or as root"};
  }
  return answer;
}

Result<std::unique_ptr<ControlSocket>> ControlSocket::Listen(asio::io_context& io,
                                                             const std::string& path) {
  if (auto length = CheckSocketPathLength(path); !length.ok()) return length.error();
  sockaddr_un addr{};
  socklen_t len = 0;
  (void)MakeAddress(path, &addr, &len);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    return Error{"cannot create the control socket: " + std::string(std::strerror(errno)),
                 "check the process limits"};
  }
  if (OwnSocketFile(path)) ::unlink(path.c_str());  // a stale one (pid numbers are reused)
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, 16) != 0) {
    const int err = errno;
    ::close(fd);
    return Error{"cannot listen on the control socket " + path + ": " + std::strerror(err),
                 "check the control directory"};
  }
  std::unique_ptr<ControlSocket> socket(new ControlSocket(io, path));
  boost::system::error_code ec;
  socket->acceptor_.assign(Local(), fd, ec);
  if (ec) {
    ::close(fd);
    ::unlink(path.c_str());
    return Error{"cannot use the control socket " + path + ": " + ec.message(), ""};
  }
  socket->Accept();
  return socket;
}

ControlSocket::ControlSocket(asio::io_context& io, std::string path)
    : path_(std::move(path)), acceptor_(io), backoff_(io, "the control socket") {}

ControlSocket::~ControlSocket() { Stop(); }

void ControlSocket::Register(const std::string& command, Handler handler) {
  handlers_[command] = std::move(handler);
}

void ControlSocket::Stop() {
  if (stopped_) return;
  stopped_ = true;
  backoff_.Cancel();
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  ::unlink(path_.c_str());
}

void ControlSocket::Dispatch(const std::string& line, Reply reply) {
  std::vector<std::string> words = SplitWords(line);
  const std::string command = words.empty() ? "" : words.front();
  const auto it = handlers_.find(command);
  if (it == handlers_.end()) {
    std::string known;
    for (const auto& [name, handler] : handlers_) known += (known.empty() ? "" : ", ") + name;
    reply("error: unknown command '" + command + "' (known: " + known + ")\n");
    return;
  }
  words.erase(words.begin());
  it->second(words, std::move(reply));
}

void ControlSocket::Accept() {
  acceptor_.async_accept(
      lifetime_.Wrap([this](const boost::system::error_code& ec, Local::socket peer) {
        if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
        if (ec) {
          // Out of descriptors, say: the client stays in the backlog, so wait before trying.
          backoff_.Failed(ec.message(), lifetime_.Wrap([this] {
            if (!stopped_) Accept();
          }));
          return;
        }
        backoff_.Succeeded();
        const int fd = peer.native_handle();
        ::fcntl(fd, F_SETFD, FD_CLOEXEC);
        if (PeerAllowed(fd)) {
          Dispatcher dispatch = lifetime_.Wrap(
              [this](const std::string& line, Reply reply) { Dispatch(line, std::move(reply)); });
          std::make_shared<Session>(std::move(peer), std::move(dispatch))->Start();
        }
        Accept();
      }));
}

}  // namespace gculaunch
