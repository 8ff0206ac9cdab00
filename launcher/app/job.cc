#include "launcher/app/job.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "launcher/cluster/agent_link.h"
#include "launcher/run/agent_store.h"
#include "launcher/cluster/coordinator.h"
#include "launcher/spec/dry_run.h"
#include "base/exit_codes.h"
#include "launcher/run/exit_summary.h"
#include "launcher/run/job_planner.h"
#include "launcher/cluster/job_protocol.h"
#include "launcher/cluster/node_agent.h"
#include "launcher/run/output_writer.h"
#include "launcher/spec/python_shim.h"
#include "launcher/run/rank_output.h"
#include "launcher/sys/child_watcher.h"
#include "launcher/sys/free_port.h"
#include "launcher/sys/guardian.h"
#include "launcher/sys/process_setup.h"
#include "launcher/sys/spawner.h"

namespace gculaunch {

namespace fs = std::filesystem;

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

struct MultiNodeSettings {
  NodeAgentSettings agent;
  RemoteLinkOptions remote;
  CoordinatorSettings coordinator;
};

// Everything the multi-node pieces need, from the spec (docs/multinode.md).
MultiNodeSettings MakeMultiNodeSettings(const LaunchSpec& spec, const RankRuntime& runtime) {
  MultiNodeSettings m;
  const auto timeout = std::chrono::milliseconds(static_cast<long long>(spec.rdzv_timeout_s * 1000));
  job::NodeRegistration reg;
  reg.node_rank = spec.node_rank;
  reg.nnodes = spec.nnodes;
  reg.nproc = spec.nproc_per_node;
  reg.max_restarts = spec.max_restarts;
  reg.run_id = runtime.run_id;
  reg.host = sys::HostName();
  reg.pid = static_cast<int>(::getpid());

  m.agent.config.node_rank = spec.node_rank;
  m.agent.config.max_restarts = spec.max_restarts;
  m.agent.config.master_addr = spec.master_addr;
  m.agent.registration = reg;
  m.agent.is_master = spec.node_rank == 0;
  m.agent.master_addr = spec.master_addr;
  m.agent.agent_port = spec.agent_port;
  m.agent.ranks_port = std::to_string(
      spec.store_mode == StoreMode::kAgent ? spec.agent_port : spec.worker_port);

  m.remote.host = spec.master_addr;
  m.remote.port = spec.agent_port;
  m.remote.connect_timeout = timeout;
  m.remote.node_rank = spec.node_rank;

  m.coordinator.config.nnodes = spec.nnodes;
  m.coordinator.config.max_restarts = spec.max_restarts;
  m.coordinator.config.master = reg;
  m.coordinator.config.rdzv_timeout_s = static_cast<int>(spec.rdzv_timeout_s);
  m.coordinator.rdzv_timeout = timeout;
  m.coordinator.ranks_port = spec.store_mode == StoreMode::kAgent ? 0
                             : spec.worker_port != 0             ? spec.worker_port
                                                                 : -1;
  return m;
}

// The job-wide part of the exit summary: why the job ended, as every node tells it.
void DescribeJobEnd(const NodeAgent& agent, SummaryInput& in) {
  if (agent.join_error()) {
    in.job_outcome = in.exit_code == exit_code::kRendezvousFailed ? "rendezvous_failed"
                                                                  : "job_error";
    in.job_json = {{"kind", in.job_outcome}, {"what", agent.join_error()->Format()}};
    return;
  }
  if (!agent.outcome()) return;
  const job::StopMarker& m = *agent.outcome();
  in.job_outcome = m.kind == job::StopMarker::Kind::kJobError &&
                           m.exit_code == exit_code::kRendezvousFailed
                       ? "rendezvous_failed"
                       : job::KindName(m.kind);
  in.job_json = nlohmann::json::parse(job::Encode(m), nullptr, false);
  if (m.kind != job::StopMarker::Kind::kSuccess) in.job_cause = "the job stopped: " + job::Describe(m);
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
  } else if (spec.master_port == 0 && spec.nnodes == 1) {
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

    const bool multinode = spec.nnodes > 1;
    auto hooks = std::make_shared<ConnectionHooks>();
    std::optional<AgentStore> store;
    if (store_socket) {
      store.emplace(io, std::move(*store_socket), log,
                    multinode ? ConnectionHooks::Options(hooks) : rendezvous::ServerOptions{});
      store->server().Set("run_id", runtime.run_id);
    }

    // ---- multi-node: this node's agent, and node 0's coordinator ----
    config.policy.job = multinode;
    std::optional<LocalAgentLink> local_link;
    std::optional<RemoteAgentLink> remote_link;
    std::optional<NodeAgent> agent;
    std::optional<Coordinator> coordinator;
    if (multinode) {
      const MultiNodeSettings settings = MakeMultiNodeSettings(spec, runtime);
      AgentLink* link = nullptr;
      if (store) {
        local_link.emplace(io, store->server());
        link = &*local_link;
        coordinator.emplace(io, store->server(), *store, settings.coordinator, log);
        hooks->target = &*coordinator;
      } else {
        remote_link.emplace(io, settings.remote, log);
        link = &*remote_link;
      }
      agent.emplace(io, *link, remote_link ? &*remote_link : nullptr, planner, settings.agent,
                    log);
    }

    JobOutcome outcome;
    {
      Supervisor supervisor(WorkerGroupDeps{io, spawner, watcher, writer, flow,
                                            guardian ? &*guardian : nullptr, console_out,
                                            console_err},
                            log, config, planner, store && !multinode ? &*store : nullptr,
                            agent ? &*agent : nullptr);
      if (agent) {
        agent->Attach(supervisor);
        if (coordinator) coordinator->Start();
        agent->Start();
      }
      outcome = supervisor.Run();
      if (agent) {
        // The agent says bye; node 0 keeps the store up until every node said bye or was
        // lost (they heartbeat until then), with a bound for a node stuck in its teardown.
        const auto bound = std::chrono::steady_clock::now() + config.grace + config.kill_wait +
                           std::chrono::seconds(30);
        // The Supervisor no longer listens: a teardown signal now ends the wait at once.
        bool interrupted = false;
        boost::asio::signal_set interrupt(io, SIGINT, SIGTERM, SIGQUIT);
        interrupt.async_wait([&](const boost::system::error_code& ec, int) {
          if (!ec) interrupted = true;
        });
        while (!interrupted && !(agent->finished() && (!coordinator || coordinator->finished()))) {
          if (io.run_one_until(bound) == 0) break;
        }
        interrupt.cancel();
        if (coordinator && !coordinator->finished()) {
          log.warn("stopping the store although not every node said bye");
        }
        hooks->target = nullptr;
      }
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
      if (agent) DescribeJobEnd(*agent, in);
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
