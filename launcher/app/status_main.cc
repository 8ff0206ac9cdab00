#include "launcher/app/status_main.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/exit_codes.h"
#include "launcher/run/control_socket.h"
#include "launcher/run/logging.h"
#include "launcher/run/status_view.h"

namespace gculaunch {
namespace {

constexpr const char* kUsage =
    "usage: gculaunch status [--format text|json] [--watch [SECONDS]] [--job RUN_ID] [--node N]\n"
    "                        [--pid PID] [--timeout SECONDS]\n"
    "Shows the gculaunch job running on this node: run id, epoch, restarts used, the layout,\n"
    "each rank's pid, state, CPU, memory, uptime and seconds since its last output; on node 0\n"
    "of a multi-node job the nodes with their addresses and last heartbeat.\n"
    "  --format text|json  text (default) or the JSON document (docs/operations.md)\n"
    "  --watch [SECONDS]   show it again every SECONDS (default 2) until the job ends or Ctrl-C\n"
    "  --job RUN_ID        with several jobs of this user here: the one with this run id\n"
    "  --node N            the launch of node rank N\n"
    "  --pid PID           the launch whose gculaunch has this pid\n"
    "  --timeout SECONDS   how long to wait for an answer (default 10)\n";

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

struct StatusArgs {
  ControlSelector selector;
  bool json = false;
  double watch_s = 0;  ///< 0: once
  double timeout_s = 10;
};

// A number in (0, max]; nullopt otherwise.
std::optional<double> Seconds(const std::string& value, double max) {
  char* end = nullptr;
  errno = 0;
  const double s = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno != 0 || !(s > 0) || s > max) return std::nullopt;
  return s;
}

std::optional<int> Count(const std::string& value, int min) {
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0 || n < min || n > 1 << 30) return std::nullopt;
  return static_cast<int>(n);
}

Status ParseValue(const std::string& flag, const std::string& value, StatusArgs* a) {
  const std::string prefix = "gculaunch status: " + flag + " '" + value + "' ";
  if (flag == "--format") {
    if (value != "text" && value != "json") {
      return Error{prefix + "is not a format", "use --format text or --format json"};
    }
    a->json = value == "json";
  } else if (flag == "--job") {
    if (value.empty()) return Error{"gculaunch status: --job is empty", "give the run id"};
    a->selector.run_id = value;
  } else if (flag == "--node") {
    auto n = Count(value, 0);
    if (!n) return Error{prefix + "is not a node rank", "give a node rank, e.g. --node 1"};
    a->selector.node_rank = *n;
  } else if (flag == "--pid") {
    auto n = Count(value, 1);
    if (!n) return Error{prefix + "is not a process id", "give the pid of a running gculaunch"};
    a->selector.pid = *n;
  } else {
    auto s = Seconds(value, 3600);
    if (!s) return Error{prefix + "is not a number of seconds", "give seconds between 0 and 3600"};
    (flag == "--watch" ? a->watch_s : a->timeout_s) = *s;
  }
  return OkStatus();
}

Result<StatusArgs> ParseStatusArgs(const std::vector<std::string>& args, bool* help) {
  StatusArgs parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      *help = true;
      return parsed;
    }
    if (arg == "--watch" && (i + 1 >= args.size() || args[i + 1].starts_with("-"))) {
      parsed.watch_s = 2;  // --watch without a value
      continue;
    }
    const bool valued = arg == "--format" || arg == "--job" || arg == "--node" || arg == "--pid" ||
                        arg == "--timeout" || arg == "--watch";
    if (!valued) {
      return Error{"gculaunch status: unknown argument '" + arg + "'",
                   "see gculaunch status --help"};
    }
    if (i + 1 >= args.size()) {
      return Error{"gculaunch status: " + arg + " needs a value", "see gculaunch status --help"};
    }
    if (Status ok = ParseValue(arg, args[++i], &parsed); !ok.ok()) return ok.error();
  }
  return parsed;
}

// One answer, printed; false when the launch did not answer (it ended).
bool ShowOnce(const ControlEndpoint& launch, const StatusArgs& a, bool clear, Error* failed) {
  const auto timeout = std::chrono::milliseconds(static_cast<long long>(a.timeout_s * 1000));
  auto answer = ControlRequest(launch.path, "status", timeout);
  if (!answer.ok()) {
    *failed = answer.error();
    return false;
  }
  auto doc = nlohmann::json::parse(*answer, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    *failed = Error{"pid " + std::to_string(launch.pid) + " answered: " + *answer,
                    "is that gculaunch of the same version as this one?"};
    return false;
  }
  std::string out = a.json ? doc.dump(2) + "\n" : StatusText(doc);
  if (clear) out = "\033[H\033[2J" + out;  // a terminal: redraw in place
  Write(STDOUT_FILENO, out);
  return true;
}

}  // namespace

int StatusMain(const std::vector<std::string>& args, const EnvMap& env) {
  bool help = false;
  auto parsed = ParseStatusArgs(args, &help);
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
    PrintError(Error{"gculaunch status: " + launch.error().what, launch.error().hint});
    return 1;
  }
  const bool clear = parsed->watch_s > 0 && !parsed->json && ::isatty(STDOUT_FILENO) == 1;
  Error failed;
  if (!ShowOnce(*launch, *parsed, clear, &failed)) {
    PrintError(failed);
    return 1;
  }
  // --watch: until the job ends (its socket goes away) or Ctrl-C (SIGINT's default action).
  while (parsed->watch_s > 0) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(static_cast<long long>(parsed->watch_s * 1000)));
    if (!ShowOnce(*launch, *parsed, clear, &failed)) {
      Write(STDERR_FILENO, "gculaunch status: the job ended (pid " + std::to_string(launch->pid) +
                               " no longer answers)\n");
      return exit_code::kSuccess;
    }
  }
  return exit_code::kSuccess;
}

}  // namespace gculaunch
