#include "launcher/job.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <boost/asio/io_context.hpp>

#include "launcher/agent_store.h"
#include "launcher/dry_run.h"
#include "launcher/exit_codes.h"
#include "launcher/exit_summary.h"
#include "launcher/output_writer.h"
#include "launcher/python_shim.h"
#include "launcher/rank_output.h"
#include "launcher/sys/child_watcher.h"
#include "launcher/sys/free_port.h"
#include "launcher/sys/guardian.h"
#include "launcher/sys/process_setup.h"
#include "launcher/sys/spawner.h"

namespace gculaunch {

namespace fs = std::filesystem;

std::string ScriptOf(const std::vector<std::string>& rank_argv, const LaunchSpec& spec) {
  if (spec.python.empty() || rank_argv.size() < 3 || rank_argv[1] != "-u") return "";
  if (rank_argv[2] == "-m" || rank_argv[2] == "-c" || rank_argv[2] == "-") return "";
  return rank_argv[2];
}

std::string NewRunId() {
  std::random_device random;
  std::uniform_int_distribution<int> hex(0, 15);
  std::string id;
  for (int i = 0; i < 32; ++i) {
    if (i == 8 || i == 12 || i == 16 || i == 20) id += '-';
    id += "0123456789abcdef"[hex(random)];
  }
  return id;
}

Result<std::vector<RankLaunch>> JobPlanner::PlanAttempt(int restart_count) {
  std::vector<RankLaunch> ranks;
  for (int lr = 0; lr < spec_.nproc_per_node; ++lr) {
    RankLaunch r;
    r.local_rank = lr;
    r.rank = spec_.rank_offset + lr;
    r.program = spec_.executable;
    r.argv = BuildRankArgv(spec_, lr);
    r.env = BuildRankEnv(spec_, base_, lr, restart_count, runtime_).ToStrings();
    r.error_file = RankErrorFile(runtime_, restart_count, lr);
    if (static_cast<size_t>(lr) < spec_.rank_cpus.size()) {
      r.cpus = spec_.rank_cpus[static_cast<size_t>(lr)];
    }

    // A fresh attempt directory; an error file found there is stale (an
    // earlier run with the same --log-dir and run id) and goes.
    const fs::path dir = fs::path(r.error_file).parent_path();
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
      return Error{"cannot create " + dir.string() + ": " + ec.message(),
                   spec_.log_dir.empty() ? "check TMPDIR" : "choose a writable --log-dir"};
    }
    fs::remove(r.error_file, ec);
    if (ec) {
      return Error{"cannot remove the stale error file " + r.error_file + ": " + ec.message(),
                   "remove it by hand"};
    }
    if (!spec_.log_dir.empty()) {
      r.stdout_log = (dir / "stdout.log").string();
      r.stderr_log = (dir / "stderr.log").string();
    }
    const bool shown = spec_.console_local_ranks.empty() ||
                       std::find(spec_.console_local_ranks.begin(),
                                 spec_.console_local_ranks.end(),
                                 lr) != spec_.console_local_ranks.end();
    const int redirected = spec_.redirects.For(lr);
    r.stdout_to_console = shown && !(redirected & StdStreams::kStdout);
    r.stderr_to_console = shown && !(redirected & StdStreams::kStderr);
    if (lr == 0 && spec_.stdin_mode == StdinMode::kRank0) {
      r.inherit_stdin = true;
      r.take_terminal = rank0_takes_terminal_;
    }
    ranks.push_back(std::move(r));
  }
  return ranks;
}

namespace {

// Checks what the frontend cannot know before a launch: that the script a
// Python rank is asked to run exists.
Status CheckScript(const LaunchSpec& spec) {
  for (int lr = 0; lr < spec.nproc_per_node; ++lr) {
    const std::string script = ScriptOf(BuildRankArgv(spec, lr), spec);
    if (script.empty()) return OkStatus();
    if (::access(script.c_str(), R_OK) != 0) {
      const int err = errno;
      if (err == ENOENT || err == ENOTDIR) {
        return Error{"SCRIPT '" + script + "' was not found",
                     "check the path (a relative path starts in the current directory)"};
      }
      return Error{"SCRIPT '" + script + "' cannot be read: " + std::strerror(err),
                   "check its permissions"};
    }
    if (script.find("${local_rank}") == std::string::npos &&
        script.find("$local_rank") == std::string::npos) {
      return OkStatus();  // the same for every rank
    }
  }
  return OkStatus();
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) return Error{"cannot write " + path, "check that its directory is writable"};
  }
  fs::rename(tmp, path, ec);
  if (ec) return Error{"cannot write " + path + ": " + ec.message(), "check the path"};
  return OkStatus();
}

}  // namespace

int RunJob(const LaunchSpec& spec, const EnvMap& env, spdlog::logger& log, LogSink& sink,
           const JobOptions& options) {
  sys::EnsureStdioOpen();
  sys::IgnoreSigpipe();
  sys::DefaultSigchld();

  if (auto script = CheckScript(spec); !script.ok()) {
    PrintError(script.error());
    return exit_code::kSpawnFailed;
  }

  // Before any thread or socket exists.
  std::optional<sys::Guardian> guardian;
  if (auto started = sys::Guardian::Start(); started.ok()) {
    guardian.emplace(std::move(*started));
  } else {
    log.warn("no guardian process ({}): processes the ranks start may outlive gculaunch "
             "if it is killed",
             started.error().what);
  }

  // ---- launch-time choices ----
  LaunchChoices choices;
  choices.generated_run_id = spec.run_id.empty() ? NewRunId() : spec.run_id;
  choices.launcher_pid = std::to_string(::getpid());  // the ranks' parent (--python-shim)
  // The agent store's port is bound now and kept (port 0: the free port the
  // kernel picked is the one the ranks get), after the guardian fork so that
  // the guardian never holds it.
  std::optional<rendezvous::ListenSocket> store_socket;
  if (HostsAgentStore(spec)) {
    auto bound = BindStorePort(spec);
    if (!bound.ok()) {
      PrintError(bound.error());
      return exit_code::kUsage;
    }
    if (spec.master_port == 0) choices.chosen_port = std::to_string(bound->port());
    store_socket.emplace(std::move(*bound));
  } else if (spec.master_port == 0) {
    auto port = sys::PickFreePort();
    if (!port.ok()) {
      PrintError(port.error());
      return exit_code::kUsage;
    }
    choices.chosen_port = std::to_string(*port);
  }
  std::string scratch;
  if (spec.log_dir.empty()) {
    std::string pattern = env.GetOr("TMPDIR", "");
    if (pattern.empty()) pattern = "/tmp";
    pattern += "/gculaunch-" + choices.generated_run_id.substr(0, 8) + "-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      log.error("cannot create a temporary directory for the ranks' error files in {}: {} "
                "(fix: set TMPDIR to a writable directory, or pass --log-dir)",
                fs::path(pattern).parent_path().string(), std::strerror(errno));
      return exit_code::kUsage;
    }
    scratch = pattern;
    choices.scratch_dir = scratch;
    if (guardian) guardian->RemoveAtExit(scratch);
  }
  const RankRuntime runtime = ResolveRankRuntime(spec, choices);
  if (!spec.layout.empty()) {
    // The layout names the port as the dry run does; by now it is known.
    std::string layout = spec.layout;
    const std::string placeholder = kPortPlaceholder;
    if (auto at = layout.find(placeholder); at != std::string::npos) {
      layout.replace(at, placeholder.size(), runtime.master_port);
    }
    log.info("{}", layout);
  }
  if (spec.python_shim) {
    // Once per run; every attempt's ranks load it from there.
    if (Status written = WritePythonShim(PythonShimDir(runtime)); !written.ok()) {
      PrintError(written.error());
      return exit_code::kUsage;
    }
  }
  if (!spec.omp_num_threads_default.empty()) {
    log.info("OMP_NUM_THREADS={} for every rank (not set in the environment; set it to choose)",
             spec.omp_num_threads_default);
  }

  // ---- the event loop and its helpers ----
  int exit_code_value = exit_code::kInternal;
  bool all_groups_empty = false;
  {
    boost::asio::io_context io;
    OutputFlow flow(io);
    OutputWriter writer({}, flow.SpaceCallback());
    TargetPtr console_out = OutputTarget::Borrowed(STDOUT_FILENO, "stdout");
    TargetPtr console_err = OutputTarget::Borrowed(STDERR_FILENO, "stderr");
    sink.Attach(&writer, console_err);

    sys::ChildWatcher watcher(io, options.force_sigchld);
    if (watcher.mode() == sys::ChildWatcher::Mode::kSigchld) {
      log.info("exit detection: SIGCHLD + waitpid ({})", watcher.fallback_reason());
    }
    sys::Spawner spawner;

    const bool rank0_terminal = spec.stdin_mode == StdinMode::kRank0 && sys::OwnsTerminal();
    JobPlanner planner(spec, env, runtime, rank0_terminal);
    SupervisorConfig config;
    config.policy.nranks = spec.nproc_per_node;
    config.policy.max_restarts = spec.max_restarts;
    config.grace = std::chrono::milliseconds(static_cast<long long>(spec.grace_period_s * 1000));
    config.kill_wait = options.kill_wait;
    config.launcher_start = options.started;
    // SIGHUP: the session really ended only when gculaunch has a terminal;
    // a SIG_IGN inherited from nohup stays.
    config.hup = sys::StdinIsTerminal() ? HupMode::kTeardown : HupMode::kIgnore;
    config.catch_hup = !sys::SignalIgnored(SIGHUP);

    std::optional<AgentStore> store;
    if (store_socket) {
      store.emplace(io, std::move(*store_socket), log);
      store->server().Set("run_id", runtime.run_id);
    }

    JobOutcome outcome;
    {
      Supervisor supervisor(WorkerGroupDeps{io, spawner, watcher, writer, flow,
                                            guardian ? &*guardian : nullptr, console_out,
                                            console_err},
                            log, config, planner, store ? &*store : nullptr);
      outcome = supervisor.Run();
      if (store) store->Stop();
      exit_code_value = outcome.exit_code;
      all_groups_empty = outcome.stuck.empty();

      // ---- exit summary ----
      SummaryInput in;
      in.host = sys::HostName();
      in.node_rank = spec.node_rank;
      in.exit_code = outcome.exit_code;
      in.final_state = outcome.final_state;
      in.restarts = outcome.restarts;
      in.max_restarts = spec.max_restarts;
      in.records = outcome.records;
      in.stuck = outcome.stuck;
      in.start_error = outcome.start_error;
      in.start_error_local_rank = outcome.start_error_local_rank;
      in.master_port = runtime.master_port;
      in.master_port_given = spec.master_port != 0;
      in.rank0_hosts_store = spec.store_mode == StoreMode::kRank0;
      in.child_watcher = watcher.mode_name();
      in.start_time = outcome.start_time;
      in.end_time = outcome.end_time;
      for (const RankRecord& r : outcome.records) {
        if (r.restart_count != outcome.restarts || r.error_file.empty()) continue;
        std::ifstream file(r.error_file, std::ios::binary);
        if (!file) continue;
        std::stringstream text;
        text << file.rdbuf();
        in.error_files[{r.restart_count, r.local_rank}] = text.str();
      }
      const ExitSummary summary = BuildExitSummary(in);
      for (const std::string& line : summary.text) {
        writer.Urgent(console_err, "gculaunch: " + line + "\n");
      }
      if (!spec.summary_json.empty()) {
        // Rank output may hold invalid UTF-8: replace it rather than throw.
        const std::string text =
            summary.json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
        if (auto w = WriteTextFile(spec.summary_json, text + "\n"); !w.ok()) {
          log.warn("--summary-json: {}", w.error().what);
        }
      }
      if (!spec.error_file_parent.empty() && summary.parent_error) {
        const std::string text =
            summary.parent_error->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        if (auto w = WriteTextFile(spec.error_file_parent, text + "\n"); !w.ok()) {
          log.warn("TORCHELASTIC_ERROR_FILE: {}", w.error().what);
        }
      }
    }
    if (rank0_terminal) sys::ReclaimTerminal();
    sink.Detach();
    if (!writer.Finish(options.output_flush)) {
      const std::string note =
          "gculaunch: warning: the console did not accept all output in time; the rest is "
          "lost\n";
      (void)!::write(STDERR_FILENO, note.data(), note.size());
    }
  }

  if (guardian) {
    if (all_groups_empty) {
      guardian->Done(/*reap=*/false);  // it removes the scratch directory after we are gone
    } else {
      guardian->Abandon();  // it SIGKILLs what is left, once more, and cleans up
    }
  } else if (!scratch.empty()) {
    std::error_code ec;
    fs::remove_all(scratch, ec);
  }
  return exit_code_value;
}

}  // namespace gculaunch
