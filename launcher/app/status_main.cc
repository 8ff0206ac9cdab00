#include "launcher/app/status_main.h"

#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/duration.h"
#include "base/exit_codes.h"
#include "launcher/app/control_args.h"
#include "launcher/ops/status_view.h"
#include "launcher/run/logging.h"

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

struct StatusArgs : ControlArgs {
  bool json = false;
  double watch_s = 0;  ///< 0: once
};

Status ParseStatusArgs(std::vector<std::string> args, StatusArgs* a) {
  a->timeout_s = 10;
  // --watch without a value means every 2 s.
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--watch" && (i + 1 >= args.size() || args[i + 1].starts_with("-"))) {
      args.insert(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, "2");
    }
  }
  auto own = [a](const std::string& flag, const std::string& value) -> Status {
    const std::string quoted = "gculaunch status: " + flag + " '" + value + "' ";
    if (flag == "--format") {
      if (value != "text" && value != "json") {
        return Error{quoted + "is not a format", "use --format text or --format json"};
      }
      a->json = value == "json";
      return OkStatus();
    }
    auto s = ParseSeconds(value, 3600);
    if (!s) return Error{quoted + "is not a number of seconds", "give seconds between 0 and 3600"};
    a->watch_s = *s;
    return OkStatus();
  };
  return ParseControlArgs("status", args, {"--format", "--watch"}, own, a);
}

// One answer, printed; false when the launch did not answer (it ended).
bool ShowOnce(const ControlEndpoint& launch, const StatusArgs& a, bool clear, Error* failed) {
  const auto timeout = SecondsToMillis(a.timeout_s);
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
  WriteAll(STDOUT_FILENO, out);
  return true;
}

}  // namespace

int StatusMain(const std::vector<std::string>& args, const EnvMap& env) {
  StatusArgs parsed;
  if (Status ok = ParseStatusArgs(args, &parsed); !ok.ok()) {
    PrintError(ok.error());
    return exit_code::kUsage;
  }
  if (parsed.help) {
    WriteAll(STDOUT_FILENO, kUsage);
    return exit_code::kSuccess;
  }
  auto launch = FindControlEndpoint(env.GetOr("XDG_RUNTIME_DIR", ""), parsed.selector);
  if (!launch.ok()) {
    PrintError(Error{"gculaunch status: " + launch.error().what, launch.error().hint});
    return 1;
  }
  const bool clear = parsed.watch_s > 0 && !parsed.json && ::isatty(STDOUT_FILENO) == 1;
  Error failed;
  if (!ShowOnce(*launch, parsed, clear, &failed)) {
    PrintError(failed);
    return 1;
  }
  // --watch: until the job ends (its socket goes away) or Ctrl-C (SIGINT's default action).
  while (parsed.watch_s > 0) {
    std::this_thread::sleep_for(SecondsToMillis(parsed.watch_s));
    if (!ShowOnce(*launch, parsed, clear, &failed)) {
      WriteAll(STDERR_FILENO, "gculaunch status: the job ended (pid " +
                                  std::to_string(launch->pid) + " no longer answers)\n");
      return exit_code::kSuccess;
    }
  }
  return exit_code::kSuccess;
}

}  // namespace gculaunch
