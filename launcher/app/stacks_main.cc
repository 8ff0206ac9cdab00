#include "launcher/app/stacks_main.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/exit_codes.h"
#include "launcher/run/control_socket.h"
#include "launcher/run/logging.h"

namespace gculaunch {
namespace {

constexpr const char* kUsage =
    "usage: gculaunch stacks [--pid PID] [--timeout SECONDS]\n"
    "Prints every local rank's Python stacks of the gculaunch jobs running on this node\n"
    "(this network namespace), without stopping them.  The ranks need --stack-dumps (or\n"
    "--hang-timeout); a rank without the hook is reported, never signalled.\n"
    "  --pid PID          only the launch whose gculaunch has this pid\n"
    "  --timeout SECONDS  how long to wait for each launch's answer (default 30)\n";

void Write(int fd, const std::string& text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

struct StacksArgs {
  int pid = 0;
  double timeout_s = 30;
};

Result<StacksArgs> ParseStacksArgs(const std::vector<std::string>& args, bool* help) {
  StacksArgs parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      *help = true;
      return parsed;
    }
    if ((arg == "--pid" || arg == "--timeout") && i + 1 < args.size()) {
      const std::string& value = args[++i];
      char* end = nullptr;
      errno = 0;
      if (arg == "--pid") {
        const long pid = std::strtol(value.c_str(), &end, 10);
        if (value.empty() || *end != '\0' || errno != 0 || pid <= 0 || pid > 1 << 30) {
          return Error{"gculaunch stacks: --pid '" + value + "' is not a process id",
                       "give the pid of a running gculaunch, e.g. --pid 4242"};
        }
        parsed.pid = static_cast<int>(pid);
      } else {
        const double s = std::strtod(value.c_str(), &end);
        if (value.empty() || *end != '\0' || errno != 0 || !(s > 0) || s > 3600) {
          return Error{"gculaunch stacks: --timeout '" + value + "' is not a number of seconds",
                       "give seconds between 0 and 3600, e.g. --timeout 30"};
        }
        parsed.timeout_s = s;
      }
      continue;
    }
    if (arg == "--pid" || arg == "--timeout") {
      return Error{"gculaunch stacks: " + arg + " needs a value", "e.g. " + arg + " 30"};
    }
    return Error{"gculaunch stacks: unknown argument '" + arg + "'", "see gculaunch stacks --help"};
  }
  return parsed;
}

// Sends "stacks" to the launch with `pid` and returns its whole answer.
Result<std::string> Ask(int pid, double timeout_s) {
  const std::string name = ControlSocketName(pid);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Error{"cannot create a socket: " + std::string(std::strerror(errno)), ""};
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    const int err = errno;
    ::close(fd);
    return Error{"cannot reach gculaunch pid " + std::to_string(pid) + ": " + std::strerror(err),
                 "check that it is still running (and on this node)"};
  }
  const std::string request = "stacks\n";
  Write(fd, request);
  std::string answer;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  char buffer[65536];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      ::close(fd);
      return Error{"gculaunch pid " + std::to_string(pid) + " did not answer within " +
                       std::to_string(static_cast<int>(timeout_s)) + " s",
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
    return Error{"gculaunch pid " + std::to_string(pid) +
                     " closed the connection without an "
                     "answer",
                 "run gculaunch stacks as the user that started the job, or as root"};
  }
  return answer;
}

}  // namespace

int StacksMain(const std::vector<std::string>& args, const EnvMap& /*env*/) {
  bool help = false;
  auto parsed = ParseStacksArgs(args, &help);
  if (!parsed.ok()) {
    PrintError(parsed.error());
    return exit_code::kUsage;
  }
  if (help) {
    Write(STDOUT_FILENO, kUsage);
    return exit_code::kSuccess;
  }
  std::ifstream file("/proc/net/unix");
  std::stringstream text;
  text << file.rdbuf();
  std::vector<int> pids = ControlPidsFromNetUnix(text.str());
  if (parsed->pid != 0) {
    if (std::find(pids.begin(), pids.end(), parsed->pid) == pids.end()) {
      PrintError(Error{"gculaunch stacks: no running gculaunch with pid " +
                           std::to_string(parsed->pid) + " on this node",
                       "check the pid; run gculaunch stacks without --pid to ask every launch "
                       "of this node"});
      return 1;
    }
    pids = {parsed->pid};
  }
  if (pids.empty()) {
    PrintError(
        Error{"gculaunch stacks: no running gculaunch job on this node (no @gculaunch/"
              "<pid> socket in /proc/net/unix of this network namespace)",
              "run it on the node (or in the network namespace) where the job runs"});
    return 1;
  }
  int code = exit_code::kSuccess;
  for (const int pid : pids) {
    auto answer = Ask(pid, parsed->timeout_s);
    if (!answer.ok()) {
      PrintError(answer.error());
      code = 1;
      continue;
    }
    // First line "dumped <n> of <m>", then the report.
    const size_t eol = answer->find('\n');
    const std::string status = answer->substr(0, eol);
    int dumped = -1;
    int total = -1;
    if (std::sscanf(status.c_str(), "dumped %d of %d", &dumped, &total) != 2) {
      Write(STDERR_FILENO, "gculaunch stacks: pid " + std::to_string(pid) + ": " + *answer);
      code = 1;
      continue;
    }
    Write(STDOUT_FILENO, "gculaunch: " + answer->substr(eol == std::string::npos ? 0 : eol + 1));
    if (dumped != total || total == 0) code = 1;
  }
  return code;
}

}  // namespace gculaunch
