#include "launcher/app/stacks_main.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "base/duration.h"
#include "base/exit_codes.h"
#include "launcher/app/control_args.h"
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

}  // namespace

int StacksMain(const std::vector<std::string>& args, const EnvMap& env) {
  ControlArgs parsed;
  parsed.timeout_s = 30;
  if (Status ok = ParseControlArgs("stacks", args, {}, nullptr, &parsed); !ok.ok()) {
    PrintError(ok.error());
    return exit_code::kUsage;
  }
  if (parsed.help) {
    WriteAll(STDOUT_FILENO, kUsage);
    return exit_code::kSuccess;
  }
  auto launch = FindControlEndpoint(env.GetOr("XDG_RUNTIME_DIR", ""), parsed.selector);
  if (!launch.ok()) {
    PrintError(Error{"gculaunch stacks: " + launch.error().what, launch.error().hint});
    return 1;
  }
  const auto timeout = SecondsToMillis(parsed.timeout_s);
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
    WriteAll(STDERR_FILENO,
             "gculaunch stacks: pid " + std::to_string(launch->pid) + ": " + *answer);
    return 1;
  }
  WriteAll(STDOUT_FILENO, "gculaunch: " + answer->substr(eol == std::string::npos ? 0 : eol + 1));
  return dumped == total && total > 0 ? exit_code::kSuccess : 1;
}

}  // namespace gculaunch
