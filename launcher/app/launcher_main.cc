#include "launcher/app/launcher_main.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include "base/exit_codes.h"
#include "base/outcome.h"
#include "launcher/app/launch.h"
#include "launcher/cluster/store_host.h"
#include "launcher/frontend/cli.h"
#include "launcher/frontend/dry_run.h"
#include "launcher/frontend/launch_spec.h"
#include "launcher/frontend/ranks_python.h"
#include "launcher/run/exit_summary.h"
#include "launcher/run/logging.h"
#include "launcher/sys/device_probe.h"
#include "launcher/sys/local_files.h"
#include "launcher/sys/process_setup.h"
#include "launcher/sys/termination_log.h"
#include "launcher/sys/torch_probe.h"

namespace gculaunch {
namespace {

void WriteStdout(const std::string& text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(STDOUT_FILENO, p, left);
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

// An exit before the launch: the error's line, the code under --exit-codes (a usage error on
// a command line that asks for classes is fatal), the termination message.
int ExitBeforeLaunch(const ExitSettings& settings, Outcome outcome, int rank_code,
                     const Error& error) {
  PrintError(error);
  const int code = SchemeExitCode(settings.scheme, outcome, rank_code);
  const std::string path = sys::ChooseTerminationLog(settings.termination_log.value_or(""));
  if (!path.empty()) {
    if (Status written =
            sys::WriteTerminationLog(path, EarlyTerminationMessage(outcome, code, error.Format()));
        !written.ok()) {
      PrintError(written.error());
    }
  }
  return code;
}

}  // namespace

int LauncherMain(const std::vector<std::string>& args, const EnvMap& env) {
  const auto started = std::chrono::steady_clock::now();
  auto sink = std::make_shared<LogSink>();
  auto logger = MakeLogger(sink, env.GetOr("GCULAUNCH_LOG_LEVEL", "info"));

  const ExitSettings exit_settings = ScanExitSettings(args, env);
  auto parsed = ParseCli(args, env);
  if (!parsed.ok()) {
    return ExitBeforeLaunch(exit_settings, Outcome::kUsage, exit_code::kUsage, parsed.error());
  }
  if (parsed->action == CliAction::kHelp || parsed->action == CliAction::kVersion) {
    WriteStdout(parsed->text);
    return exit_code::kSuccess;
  }
  const CliOptions& options = parsed->options;
  FileSystemDeviceProbe probe(options.sysroot.value_or("/"));
  LocalFileAccess files;
  auto spec = MakeLaunchSpec(options, env, probe, files);
  if (!spec.ok()) {
    // 126/127 for a program that cannot be started, as the shell says; else a usage error.
    const bool program = spec.error().exit_code != 0;
    return ExitBeforeLaunch(exit_settings, program ? Outcome::kSpawnFailed : Outcome::kUsage,
                            program ? spec.error().exit_code : exit_code::kUsage, spec.error());
  }
  // The ranks' interpreter and torch (ranks_python.h): from the cache or the interpreter's
  // files at once; on a miss the probe runs the interpreter once, for the cache.  (SIGCHLD
  // must not be ignored while it runs: its status would be lost.)
  sys::DefaultSigchld();
  sys::TorchProbeOptions probe_options = sys::TorchProbeOptionsFor(env);
  if (spec->dry_run) probe_options.nice = 0;  // the dry run waits for it: no reason to yield
  sys::TorchProbe ranks_python = sys::TorchProbe::Start(*spec, env, std::move(probe_options));
  if (spec->dry_run) {
    // The dry run waits for the probe and shows what a launch would now use (the probe's
    // answer, once cached).
    UseRanksPython(*spec, env, ranks_python.Finish());
    // Node ranks at rendezvous: the layout line says whether this node would host the store
    // (the dry run binds no port, so it does not see another launcher holding it).
    spec->layout = DecideStoreHost(*spec, ThisHostFacts(false)).layout;
    WriteStdout(RenderDryRun(*spec, env));
    return exit_code::kSuccess;
  }

  for (const std::string& warning : spec->warnings) logger->warn("{}", warning);

  UseRanksPython(*spec, env, ranks_python.Quick());
  LaunchOptions launch;
  launch.started = started;
  launch.torch_probe = &ranks_python;
  launch.force_sigchld = env.GetOr("GCULAUNCH_CHILD_WATCHER", "") == "sigchld";
  try {
    return RunLaunch(*spec, env, *logger, *sink, launch);
  } catch (const std::exception& e) {
    // Last resort (a bug, or memory exhaustion).  By now the objects RunLaunch
    // owned were destroyed; the guardian, closed without "done", has killed
    // every rank's process group.
    sink->Detach();
    return ExitBeforeLaunch(exit_settings, Outcome::kInternal, exit_code::kInternal,
                            Error{std::string("internal error: ") + e.what(),
                                  "please report this bug; every rank was stopped"});
  }
}

}  // namespace gculaunch
