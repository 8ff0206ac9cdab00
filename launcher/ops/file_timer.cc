#include "launcher/ops/file_timer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>

namespace gculaunch {

namespace {

constexpr std::chrono::milliseconds kCheckEvery{100};
constexpr size_t kMaxLine = 4096;  // PIPE_BUF: the client refuses longer requests

double UnixSeconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

// What stands at `path` (lstat): empty when nothing does or it is a FIFO of this user (a
// leftover gculaunch may replace), else what it is ("is a regular file").
std::string Obstacle(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? "" : std::string("cannot be checked (") + std::strerror(errno) + ")";
  }
  if (S_ISFIFO(st.st_mode) && st.st_uid == ::geteuid()) return "";
  if (S_ISFIFO(st.st_mode)) return "is a FIFO of uid " + std::to_string(st.st_uid);
  if (S_ISREG(st.st_mode)) return "is a regular file";
  if (S_ISDIR(st.st_mode)) return "is a directory";
  if (S_ISLNK(st.st_mode)) return "is a symbolic link";
  return "is not a FIFO";
}

// Removes `path` only when it is a FIFO of this user: never a file someone named by mistake.
void RemoveOwnFifo(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode) && st.st_uid == ::geteuid()) {
    ::unlink(path.c_str());
  }
}

}  // namespace

std::optional<FileTimerRequest> ParseFileTimerRequest(std::string_view line) {
  const nlohmann::json doc = nlohmann::json::parse(line, nullptr, false);
  if (!doc.is_object()) return std::nullopt;
  const auto pid = doc.find("pid");
  const auto scope = doc.find("scope_id");
  const auto expiration = doc.find("expiration_time");
  const auto sig = doc.find("signal");
  if (pid == doc.end() || !pid->is_number_integer() || scope == doc.end() || !scope->is_string() ||
      expiration == doc.end() || !expiration->is_number() || sig == doc.end() ||
      !sig->is_number_integer()) {
    return std::nullopt;
  }
  FileTimerRequest r;
  const auto pid_value = pid->get<long long>();
  const auto sig_value = sig->get<long long>();
  if (pid_value <= 0 || pid_value > (1LL << 30) || sig_value < 0 || sig_value > 64) {
    return std::nullopt;
  }
  r.pid = static_cast<pid_t>(pid_value);
  r.scope_id = scope->get<std::string>();
  r.expiration_time = expiration->get<double>();
  r.signal = static_cast<int>(sig_value);
  return r;
}

bool FileTimerTable::Apply(const FileTimerRequest& request) {
  auto key = std::make_pair(request.pid, request.scope_id);
  if (request.expiration_time < 0) {
    timers_.erase(key);
    return true;
  }
  auto held = timers_.find(key);
  if (held != timers_.end()) {
    held->second = request;
    return true;
  }
  if (timers_.size() >= kMaxTimers) return false;
  timers_.emplace(std::move(key), request);
  return true;
}

std::map<pid_t, FileTimerRequest> FileTimerTable::TakeExpired(double now) {
  std::map<pid_t, FileTimerRequest> chosen;
  std::map<pid_t, bool> expired;
  for (const auto& [key, timer] : timers_) {
    if (timer.expiration_time > now) continue;
    expired[key.first] = true;
    if (timer.signal <= 0) continue;
    auto it = chosen.find(key.first);
    if (it == chosen.end() || timer.expiration_time < it->second.expiration_time) {
      chosen[key.first] = timer;
    }
  }
  for (auto it = timers_.begin(); it != timers_.end();) {
    it = expired.count(it->first.first) != 0 ? timers_.erase(it) : std::next(it);
  }
  return chosen;
}

Result<std::unique_ptr<FileTimerServer>> FileTimerServer::Start(boost::asio::io_context& io,
                                                                const std::string& path,
                                                                Reaper reaper) {
  if (const std::string obstacle = Obstacle(path); !obstacle.empty()) {
    return Error{"TORCHELASTIC_TIMER_FILE '" + path + "' " + obstacle +
                     ", not a FIFO of this user: gculaunch leaves it alone",
                 "set TORCHELASTIC_TIMER_FILE to a path that does not exist yet"};
  }
  RemoveOwnFifo(path);  // a leftover of an earlier run
  if (::mkfifo(path.c_str(), 0600) != 0) {
    return Error{"TORCHELASTIC_ENABLE_FILE_TIMER: cannot create the FIFO " + path + ": " +
                     std::strerror(errno),
                 "set TORCHELASTIC_TIMER_FILE to a path in a writable directory"};
  }
  // Read-write: the FIFO then always has a writer (us), so it never reads as end of file.
  const int fd = ::open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    const int err = errno;
    RemoveOwnFifo(path);
    return Error{
        "TORCHELASTIC_ENABLE_FILE_TIMER: cannot open the FIFO " + path + ": " + std::strerror(err),
        "check the permissions of its directory"};
  }
  // O_NOFOLLOW kept a link out; fstat makes sure the descriptor is the FIFO made above and
  // not something put in its place between mkfifo and open.
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode) || st.st_uid != ::geteuid()) {
    ::close(fd);
    return Error{"TORCHELASTIC_ENABLE_FILE_TIMER: " + path +
                     " was replaced by something other than gculaunch's FIFO while it was opened",
                 "set TORCHELASTIC_TIMER_FILE to a path in a directory only you can write"};
  }
  std::unique_ptr<FileTimerServer> server(new FileTimerServer(io, path, fd, std::move(reaper)));
  server->Read();
  server->Check();
  return server;
}

FileTimerServer::FileTimerServer(boost::asio::io_context& io, std::string path, int fd,
                                 Reaper reaper)
    : path_(std::move(path)), fifo_(io, fd), timer_(io), reaper_(std::move(reaper)) {}

FileTimerServer::~FileTimerServer() {
  lifetime_.Expire();
  boost::system::error_code ignored;
  fifo_.close(ignored);
  RemoveOwnFifo(path_);
}

void FileTimerServer::Read() {
  fifo_.async_read_some(
      boost::asio::buffer(buffer_),
      lifetime_.Wrap([this](const boost::system::error_code& ec, size_t n) {
        if (ec) return;  // closed: we are being destroyed
        partial_.append(buffer_.data(), n);
        size_t start = 0;
        for (size_t end; (end = partial_.find('\n', start)) != std::string::npos; start = end + 1) {
          if (auto request =
                  ParseFileTimerRequest(std::string_view(partial_).substr(start, end - start))) {
            Accept(*request);
          }
        }
        partial_.erase(0, start);
        if (partial_.size() > kMaxLine) partial_.clear();  // not a request: drop it
        Read();
      }));
}

void FileTimerServer::Accept(const FileTimerRequest& request) {
  if (table_.Apply(request) || warned_full_ || !warn_) return;
  warned_full_ = true;  // once: a rank that floods the table must not flood the log too
  warn_("TORCHELASTIC_ENABLE_FILE_TIMER: " + std::to_string(FileTimerTable::kMaxTimers) +
        " timers are held; new ones are ignored, the first from pid " +
        std::to_string(request.pid));
}

void FileTimerServer::Check() {
  for (const auto& [pid, expired] : table_.TakeExpired(UnixSeconds())) reaper_(expired);
  timer_.expires_after(kCheckEvery);
  timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
    if (!ec) Check();
  }));
}

}  // namespace gculaunch
