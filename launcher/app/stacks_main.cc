#include "launcher/app/stacks_main.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/exit_codes.h"
#include "launcher/run/control_socket.h"
#include "launcher/run/logging.h"

namespace gculaunch {
namespace {

constexpr const char* kUsage =
    "usage: gculaunch stacks [--job RUN_ID] [--node N] [--pid PID] [--timeout SECONDS]\n"
    "Prints every rank's Python stacks of a gculaunch job running on this node (on node 0 of a\n"
    "multi-node job: every node's), without stopping it.  The ranks need --stack-dumps (or\n"
    "--hang-timeout); a rank without the hook is reported, never signalled.  With several jobs\n"
    "of this user here, choose one:\n"
    "  --job RUN_ID       the job with this run id (--rdzv-id)\n"
    "  --node N           the launch of node rank N\n"
    "  --pid PID          the launch whose gculaunch has this pid\n"
    "  --timeout SECONDS  how long to wait for the answer (default 30)\n";

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
  ControlSelector selector;
  double timeout_s = 30;
};

Status ParseValue(const std::string& flag, const std::string& value, StacksArgs* parsed) {
  if (flag == "--job") {
    if (value.empty()) return Error{"gculaunch stacks: --job is empty", "give the run id"};
    parsed->selector.run_id = value;
  } else if (flag == "--node" || flag == "--pid") {
    const bool node = flag == "--node";
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || errno != 0 || n < (node ? 0 : 1) || n > 1 << 30) {
      return node ? Error{"gculaunch stacks: --node '" + value + "' is not a node rank",
                          "give a node rank, e.g. --node 1"}
                  : Error{"gculaunch stacks: --pid '" + value + "' is not a process id",
                          "give the pid of a running gculaunch, e.g. --pid 4242"};
    }
    (node ? parsed->selector.node_rank : parsed->selector.pid) = static_cast<int>(n);
  } else {
    char* end = nullptr;
    errno = 0;
    const double s = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || errno != 0 || !(s > 0) || s > 3600) {
      return Error{"gculaunch stacks: --timeout '" + value + "' is not a number of seconds",
                   "give seconds between 0 and 3600, e.g. --timeout 30"};
    }
    parsed->timeout_s = s;
  }
  return OkStatus();
}

Result<StacksArgs> ParseStacksArgs(const std::vector<std::string>& args, bool* help) {
  StacksArgs parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      *help = true;
      return parsed;
    }
    const bool valued = arg == "--job" || arg == "--node" || arg == "--pid" || arg == "--timeout";
    if (!valued) {
      return Error{"gculaunch stacks: unknown argument '" + arg + "'",
                   "see gculaunch stacks --help"};
    }
    if (i + 1 >= args.size()) {
      return Error{"gculaunch stacks: " + arg + " needs a value", "see gculaunch stacks --help"};
    }
    if (Status ok = ParseValue(arg, args[++i], &parsed); !ok.ok()) return ok.error();
  }
  return parsed;
}

}  // namespace

int StacksMain(const std::vector<std::string>& args, const EnvMap& env) {
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
  auto launch = FindControlEndpoint(env.GetOr("XDG_RUNTIME_DIR", ""), parsed->selector);
  if (!launch.ok()) {
    PrintError(Error{"gculaunch stacks: " + launch.error().what, launch.error().hint});
    return 1;
  }
  const auto timeout = std::chrono::milliseconds(static_cast<long long>(parsed->timeout_s * 1000));
  auto answer = ControlRequest(launch->path, "stacks", timeout);
  if (!answer.ok()) {
    PrintError(answer.error());
    return 1;
  }
  // First line "dumped <n> of <m>", then the report.
  const size_t eol = answer->find('\n');
  const std::string status = answer->substr(0, eol);
  int dumped = -1;
  int total = -1;
  if (std::sscanf(status.c_str(), "dumped %d of %d", &dumped, &total) != 2) {
    Write(STDERR_FILENO, "gculaunch stacks: pid " + std::to_string(launch->pid) + ": " + *answer);
    return 1;
  }
  Write(STDOUT_FILENO, "gculaunch: " + answer->substr(eol == std::string::npos ? 0 : eol + 1));
  return dumped == total && total > 0 ? exit_code::kSuccess : 1;
}

}  // namespace gculaunch
