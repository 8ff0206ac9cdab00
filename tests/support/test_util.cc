#include "tests/support/test_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "tests/support/helpers/pidfd_filter.h"

namespace gculaunch::testing {

TempDir::TempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/gculaunch-unit-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::Write(const std::string& relative, const std::string& content) const {
  const std::filesystem::path file = std::filesystem::path(path_) / relative;
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file) << content;
  return file.string();
}

std::string TestChild() { return GCULAUNCH_TEST_CHILD; }
std::string NoPidfdHelper() { return GCULAUNCH_NO_PIDFD; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

void MakeFifo(const std::string& path) {
  if (::mkfifo(path.c_str(), 0600) != 0) throw std::runtime_error("mkfifo failed");
}

std::string ReadFifo(const std::string& path, int lines) {
  std::string out;
  auto count = [&] { return static_cast<int>(std::count(out.begin(), out.end(), '\n')); };
  do {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return out;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
  } while (count() < lines);
  return out;
}

bool RunUntil(boost::asio::io_context& io, const std::function<bool()>& done,
              std::chrono::seconds limit) {
  bool expired = false;
  boost::asio::steady_timer guard(io, limit);
  guard.async_wait([&](const boost::system::error_code& ec) {
    if (!ec) expired = true;
  });
  io.restart();
  while (!done() && !expired) {
    if (io.run_one() == 0) break;  // nothing left to wait for
  }
  guard.cancel();
  io.poll();  // let the cancelled guard complete
  return done();
}

bool ProcessAlive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const size_t close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}

bool DisablePidfdOpen(int err) { return InstallNoPidfdFilter(err) == 0; }

}  // namespace gculaunch::testing
