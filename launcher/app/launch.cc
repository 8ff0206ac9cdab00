#include "launcher/app/launch.h"

#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "base/duration.h"
#include "base/exit_codes.h"
#include "base/outcome.h"
#include "launcher/cluster/cluster_node.h"
#include "launcher/cluster/store_board.h"
#include "launcher/cluster/store_host.h"
#include "launcher/frontend/dry_run.h"
#include "launcher/frontend/python_shim.h"
#include "launcher/frontend/stack_hook.h"
#include "launcher/frontend/warm_standby.h"
#include "launcher/ops/event_log.h"
#include "launcher/ops/file_timer.h"
#include "launcher/ops/hang_check.h"
#include "launcher/ops/hang_watch.h"
#include "launcher/ops/metrics.h"
#include "launcher/ops/metrics_http.h"
#include "launcher/ops/readiness.h"
#include "launcher/ops/stack_report.h"
#include "launcher/ops/status_model.h"
#include "launcher/ops/status_view.h"
#include "launcher/run/agent_store.h"
#include "launcher/run/exit_summary.h"
#include "launcher/run/output_writer.h"
#include "launcher/run/rank_output.h"
#include "launcher/run/rank_planner.h"
#include "launcher/sys/child_watcher.h"
#include "launcher/sys/device_probe.h"
#include "launcher/sys/free_port.h"
#include "launcher/sys/guardian.h"
#include "launcher/sys/health_runner.h"
#include "launcher/sys/process_group.h"
#include "launcher/sys/process_setup.h"
#include "launcher/sys/safe_files.h"
#include "launcher/sys/socket_owner.h"
#include "launcher/sys/spawner.h"
#include "launcher/sys/status_proc.h"
#include "launcher/sys/termination_log.h"
#include "launcher/sys/worker_exit.h"
#include "rendezvous/proxy.h"

namespace gculaunch {

namespace fs = std::filesystem;

namespace {

// The most connections the store of a launch takes, whatever the open-file limit.
constexpr std::size_t kMaxStoreConnections = 65536;

// How long the end of a run waits for dismissed standbys' groups to empty.
constexpr std::chrono::milliseconds kStandbyDrainBound{3000};

// When the background run of the ranks' interpreter starts, counted from the event loop's
// start: after the ranks' own start-up on a busy 2-core machine (a few hundred ms for plain
// Python ranks).  A job shorter than that leaves the cache as it was.
constexpr std::chrono::milliseconds kTorchProbeDelay{1000};

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
                     "check the path (a relative path starts in the current directory)",
                     exit_code::kSpawnFailed};
      }
      return Error{"SCRIPT '" + script + "' cannot be read: " + std::strerror(err),
                   "check its permissions", exit_code::kNotExecutable};
    }
    if (script.find("${local_rank}") == std::string::npos &&
        script.find("$local_rank") == std::string::npos) {
      return OkStatus();  // the same for every rank
    }
  }
  return OkStatus();
}

// Through a temporary file that is created exclusively, then renamed (never a planted one).
Status WriteTextFile(const std::string& path, const std::string& text) {
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  return sys::ReplaceFile(path, text);
}

SupervisorConfig MakeSupervisorConfig(const LaunchSpec& spec, const LaunchOptions& options,
                                      JobEvents* events) {
  SupervisorConfig config;
  config.events = events;
  config.policy.nranks = spec.nproc_per_node;
  config.policy.max_restarts = spec.max_restarts;
  config.policy.agent_decides = RunsAsCluster(spec);  // an agent decides restarts
  config.policy.backoff = MakeBackoff(spec.restart_backoff.initial_s, spec.restart_backoff.max_s);
  config.policy.streak = StreakConfig{spec.max_same_failures, spec.progress_file};
  config.progress_file = spec.progress_file;
  config.grace = SecondsToMillis(spec.grace_period_s);
  config.kill_wait = options.kill_wait;
  config.launcher_start = options.started;
  // SIGHUP: the session really ended only when gculaunch has a terminal;
  // a SIG_IGN inherited from nohup stays.
  config.hup = sys::StdinIsTerminal() ? HupMode::kTeardown : HupMode::kIgnore;
  config.catch_hup = !sys::SignalIgnored(SIGHUP);
  config.extra_stop_signals = spec.extra_stop_signals;
  return config;
}

// The health gate before every attempt (health_runner.h); null when there is nothing to check
// (a profile without cards, no tool, no --health-check).
std::unique_ptr<HealthRunner> MakeHealthRunner(const LaunchSpec& spec, const EnvMap& env,
                                               boost::asio::io_context& io,
                                               const DeviceProbe& probe) {
  std::optional<HealthPlan> plan = HealthPlanFor(spec, env);
  if (!plan) return nullptr;
  return std::make_unique<HealthRunner>(io, std::move(*plan), probe);
}

// Why this node cannot see the ranks pass init_process_group ("" when it can): only the node
// hosting the agent store sees the ranks' keys, and only a Python rank is known to be torch.
std::string InitUnknown(const LaunchSpec& spec, bool hosts_store) {
  if (spec.python.empty()) {
    return "--no-python: the program need not use torch, so ready means every local rank runs";
  }
  if (spec.store_mode == StoreMode::kRank0)
    return "rank 0 hosts the ranks' store (--no-agent-store)";
  if (!hosts_store) {
    return CapabilitiesOf(spec.rdzv).elected_leader ? "the ranks' store is on the job's leader"
                                                    : "the ranks' store is on node 0";
  }
  return "";
}

// What BuildExitSummary needs from this node, with the last attempt's error files as the
// ranks' records hold them.
SummaryInput SummaryInputOf(const LaunchSpec& spec, const RankRuntime& runtime,
                            const JobOutcome& outcome, std::string child_watcher) {
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
  in.child_watcher = std::move(child_watcher);
  in.python = spec.python;
  in.python_origin = spec.python_origin;
  in.start_time = outcome.start_time;
  in.end_time = outcome.end_time;
  // The error files as each rank's record holds them: read once, when the rank exited
  // (WorkerGroup::CopyErrorFile); nothing here opens a file a rank could have replaced.
  for (const RankRecord& r : outcome.records) {
    if (r.restart_count != outcome.restarts || !r.error_text) continue;
    in.error_files[{r.restart_count, r.local_rank}] = *r.error_text;
    // Nanoseconds: torch 1.13's own timestamp has whole seconds (exit_summary.h).
    if (r.error_file_mtime_ns > 0) {
      in.error_file_mtime_ns[{r.restart_count, r.local_rank}] = r.error_file_mtime_ns;
    }
  }
  return in;
}

}  // namespace

// The event loop and every object that runs on it (step 4).  Members are declared in
// construction order; the io_context, first, is destroyed last.
struct Launch::Loop {
  explicit Loop(Launch& launch);
  std::string RenderMetricsNow();
  std::string StatusNow() const;
  Readiness ReadinessNow() const;
  std::map<int, double> ProgressAges() const;

  boost::asio::io_context io;
  OutputFlow flow{io};
  OutputWriter writer{{}, flow.SpaceCallback()};
  TargetPtr console_out = OutputTarget::Borrowed(STDOUT_FILENO, "stdout");
  TargetPtr console_err = OutputTarget::Borrowed(STDERR_FILENO, "stderr");
  sys::ChildWatcher watcher;
  sys::Spawner spawner;
  std::optional<StandbyPool> standbys;  ///< --warm-ranks
  /// Readiness waits for the other nodes before the first epoch (readiness.h).
  const bool multinode;
  const bool rank0_terminal;  ///< rank 0 reads gculaunch's terminal (--stdin rank0)
  /// Why init_process_group cannot be seen from here (readiness.h); empty: the store shows it.
  const std::string init_unknown;
  RankPlanner planner;
  JobEventHub events;                   ///< every listener below hears the job's events
  JobStatus status;                     ///< `gculaunch status`, /metrics
  std::unique_ptr<EventLog> event_log;  ///< "<run log dir>/events.jsonl"
  const SupervisorConfig config;
  /// The coordinator's connection hooks (null when nothing needs them); the store is built
  /// before the coordinator.
  std::shared_ptr<ConnectionHooks> hooks;
  /// --metrics-port: the store's counters (when this node hosts the store).
  std::shared_ptr<rendezvous::StoreMetrics> store_metrics;
  std::optional<AgentStore> store;         ///< when this node hosts the store
  std::optional<rendezvous::Proxy> proxy;  ///< --store-proxy, where node 0 hosts the store
  std::string store_endpoint;              ///< node 0's store, "host:port"
  /// Where the ranks' store connections go, for `gculaunch status`.
  std::string StoreTrafficNow() const;
  const Supervisor* supervisor = nullptr;      ///< while Supervise runs (metrics, status)
  std::unique_ptr<MetricsHttpServer> metrics;  ///< --metrics-port
};

Launch::Loop::Loop(Launch& launch)
    : watcher(io, launch.options_.force_sigchld),
      multinode(RunsAsCluster(launch.spec_)),
      rank0_terminal(launch.spec_.stdin_mode == StdinMode::kRank0 && sys::OwnsTerminal()),
      init_unknown(InitUnknown(launch.spec_, launch.store_socket_.has_value())),
      planner(launch.spec_, launch.env_, launch.runtime_, rank0_terminal, launch.log_dir_),
      config(MakeSupervisorConfig(launch.spec_, launch.options_, &events)),
      hooks(MakeConnectionHooks(launch.spec_)) {
  launch.sink_.Attach(&writer, console_err);
  writer.set_warnings(console_err);  // a log file that cannot be written (a full disk)
  spawner.set_child_open_files(launch.open_files_.before);
  if (launch.spec_.warm_ranks) {
    standbys.emplace(io, spawner, watcher, launch.guardian_ ? &*launch.guardian_ : nullptr,
                     StandbySettings{launch.spec_.preload, WarmStandbyDir(launch.runtime_),
                                     StandbyReadyDir(launch.runtime_), std::to_string(::getpid())});
    standbys->set_note([&log = launch.log_](const std::string& line) { log.warn("{}", line); });
  }
  events.Add(&status);
  if (launch.log_dir_) {
    auto opened = EventLog::Open(*launch.log_dir_, "events.jsonl", launch.runtime_.run_id,
                                 launch.spec_.node_rank);
    if (opened.ok()) {
      event_log = std::move(*opened);
      events.Add(event_log.get());
    } else {
      launch.log_.warn("{} (fix: {})", opened.error().what, opened.error().hint);
    }
  }
  if (watcher.mode() == sys::ChildWatcher::Mode::kSigchld) {
    launch.log_.info("exit detection: SIGCHLD + waitpid ({})", watcher.fallback_reason());
  }
  if (launch.metrics_socket_) store_metrics = std::make_shared<rendezvous::StoreMetrics>();
  if (launch.store_socket_) {
    auto options = ConnectionHooks::Options(hooks);
    options.metrics = store_metrics;
    options.max_connections = launch.StoreConnectionCap();
    options.connection_cap_hint = launch.StoreConnectionCapHint();
    options.max_streams = launch.StoreStreamCap();
    if (launch.spec_.store_max_queued) options.limits.max_queued = *launch.spec_.store_max_queued;
    if (launch.spec_.store_max_buffered)
      options.limits.max_buffered = *launch.spec_.store_max_buffered;
    options.agent_secret = launch.spec_.job_secret;
    options.allow = launch.spec_.store_allow;
    // The cap is the job's: at it, other local users' connections go first (server.h).
    options.foreign_peer = sys::IsForeignLocalPeer;
    store.emplace(io, std::move(*launch.store_socket_), launch.log_, std::move(options));
    launch.WarnIfStoreTooSmall();
    store->server().Set("run_id", launch.runtime_.run_id);
    // --warm-ranks: the standbys compete for the CPU only once every rank is past its start.
    if (standbys) {
      store->set_on_ranks_connecting([pool = &*standbys](int attempt, std::int64_t count) {
        pool->RanksConnected(attempt, count);
      });
    }
  }
  store_endpoint = launch.spec_.master_addr + ":" + std::to_string(launch.spec_.master_port);
  if (launch.proxy_socket_) {
    rendezvous::ProxyOptions options;
    options.upstream_host = launch.spec_.master_addr;
    options.upstream_port = static_cast<std::uint16_t>(launch.spec_.master_port);
    options.secret = launch.spec_.job_secret;
    if (launch.spec_.store_max_queued) options.limits.max_queued = *launch.spec_.store_max_queued;
    if (launch.spec_.store_max_buffered)
      options.limits.max_buffered = *launch.spec_.store_max_buffered;
    options.max_connections = launch.StoreConnectionCap();
    // Node 0 may start long after this node: wait for it as long as the join does.
    options.connect_timeout = std::chrono::milliseconds(
        static_cast<std::int64_t>(std::max(launch.spec_.rdzv_timeout_s, 1.0) * 1000));
    proxy.emplace(io, std::move(*launch.proxy_socket_), std::move(options), launch.log_);
  }
  if (launch.metrics_socket_) {
    metrics = std::make_unique<MetricsHttpServer>(
        io, std::move(*launch.metrics_socket_), [this] { return RenderMetricsNow(); },
        [this] { return ReadinessNow(); });
    metrics->set_warn([&log = launch.log_](const std::string& line) { log.warn("{}", line); });
  }
}

// Seconds since each running rank's last output or heartbeat (the freshest of the two; a
// rank that showed neither yet: since its start), by global rank.
std::map<int, double> Launch::Loop::ProgressAges() const {
  std::map<int, double> ages;
  if (supervisor == nullptr || supervisor->group() == nullptr) return ages;
  for (const RankProgress& p : supervisor->group()->Progress()) {
    if (!p.running) continue;
    double age = p.since_start_s;
    if (p.output_age_s) age = std::min(age, *p.output_age_s);
    if (p.heartbeat_age_s) age = std::min(age, *p.heartbeat_age_s);
    ages[p.rank] = age;
  }
  return ages;
}

// The answer to the control socket's "status": the job's picture with each running rank's
// /proc sample (status_view.h).
std::string Launch::Loop::StatusNow() const {
  StatusInput in;
  in.job = &status.snapshot();
  in.now = status.Now();
  for (const RankStatus& r : in.job->ranks) {
    if (r.running()) in.procs[r.pid] = sys::SampleProcess(r.pid);
  }
  in.progress_age_s = ProgressAges();
  if (standbys) in.standbys = standbys->Status();
  in.readiness = ReadinessNow();
  in.store_traffic = StoreTrafficNow();
  return StatusJson(in).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string Launch::Loop::StoreTrafficNow() const {
  if (proxy) {
    return "through this node's store proxy (" + std::string(kProxyAddress) + ":" +
           std::to_string(proxy->port()) + ", " + std::to_string(proxy->num_connections()) +
           " rank connections) to node 0's store at " + proxy->upstream() +
           (proxy->connected() ? ", over one connection" : ", not connected");
  }
  if (store) return "to this node's store (port " + std::to_string(store->server().port()) + ")";
  return "straight to the store at " + store_endpoint;
}

// What /readyz answers (readiness.h): where this node hosts the ranks' store, whether its keys
// show that every rank passed init_process_group.
Readiness Launch::Loop::ReadinessNow() const {
  ReadinessInput in;
  in.job = &status.snapshot();
  in.now = status.Now();
  in.multinode = multinode;
  in.init_unknown = init_unknown;
  if (init_unknown.empty() && store) {
    const rendezvous::Store& keys = store->server().store();
    const RankPlanner::Planned planned = planner.planned();
    in.init_mark = InitMark(
        [&keys](std::string_view key) { return keys.Find(rendezvous::Scope::kAttempt, key); },
        planned.restarts, planned.world_size);
  }
  return AssessReadiness(in);
}

// One scrape of /metrics (metrics.h): the job's picture, the store's counters, this process.
std::string Launch::Loop::RenderMetricsNow() {
  MetricsInput in;
  in.job = &status.snapshot();
  in.now = status.Now();
  if (store) {
    in.store = store_metrics.get();
    in.store_connections_open = store->server().num_sessions();
  }
  in.progress_age_s = ProgressAges();
  if (standbys) in.standbys = standbys->Status();
  in.log_bytes_dropped = writer.log_bytes_dropped();
  const sys::ProcSample self = sys::SampleProcess(::getpid());
  if (self.alive) {
    in.process_cpu_s = self.cpu_s;
    in.process_rss_bytes = self.rss_bytes;
  }
  return RenderMetrics(in);
}

Launch::Launch(const LaunchSpec& spec, const EnvMap& env, spdlog::logger& log, LogSink& sink,
               const LaunchOptions& options)
    : spec_(spec), env_(env), log_(log), sink_(sink), options_(options) {}

int Launch::Run() {
  SetUpProcess();
  if (auto script = CheckScript(spec_); !script.ok()) {
    PrintError(script.error());
    // 127 not found, 126 unreadable, as the shell says.
    return EarlyExit(Outcome::kSpawnFailed, script.error().exit_code, script.error().Format());
  }
  log_.debug("ranks' torch: {}", DescribeRanksTorch(spec_.ranks_torch));
  StartGuardian();
  if (!ChooseAtLaunch()) {
    return EarlyExit(Outcome::kUsage, exit_code::kUsage,
                     "the launch could not be prepared (store port, metrics port, scratch or "
                     "log directory): gculaunch's stderr has the line");
  }
  const int code = RunLoop();
  ConfirmTorchProbe();
  Teardown();
  return code;
}

void Launch::SetUpProcess() {
  sys::EnsureStdioOpen();
  sys::IgnoreSigpipe();
  sys::DefaultSigchld();
  // Until the supervisor watches them (Supervisor::Run): a platform's SIGTERM during the
  // start still gets a summary and exit code 143.
  sys::HoldStopSignals();
}

// The probe of the ranks' interpreter ran beside the ranks for the cache; it is taken only
// if it is done (a launch never waits for it).  An answer that differs from what this launch
// used is worth a line: the next launch uses it.
void Launch::ConfirmTorchProbe() {
  if (options_.torch_probe == nullptr) return;
  const std::optional<RanksPython> later = options_.torch_probe->FinishIfDone();
  if (!later) return;
  // What matters is what the ranks got: the NCCL names, and the interpreter.
  const bool same_torch =
      NcclErrorHandlingVariables(later->torch) == NcclErrorHandlingVariables(spec_.ranks_torch);
  const std::string used = spec_.interpreter_shim.empty() ? "" : spec_.python;
  if (same_torch && later->shim.interpreter == used) {
    log_.debug("ranks' torch, confirmed: {}", DescribeRanksTorch(later->torch));
    return;
  }
  std::string interpreter;
  if (later->shim.interpreter != used) {
    interpreter =
        "; the shim runs " + (later->shim.interpreter.empty() ? std::string("no other interpreter")
                                                              : later->shim.interpreter);
  }
  log_.info(
      "the ranks' interpreter, run once beside them, says: {}{} (this launch used: {}); "
      "the next launch uses that",
      DescribeRanksTorch(later->torch), interpreter, DescribeRanksTorch(spec_.ranks_torch));
}

// Before any thread or socket exists.  Then the soft open-file limit goes up to the hard
// one (every store connection is a descriptor); the ranks get the limit gculaunch was
// started with back (Spawner).
void Launch::StartGuardian() {
  sys::GuardianOptions options;
  options.reporter = [this](const std::string& line) { log_.warn("{}", line); };
  if (auto started = sys::Guardian::Start(std::move(options)); started.ok()) {
    guardian_.emplace(std::move(*started));
  } else {
    log_.warn(
        "no guardian process ({}): processes the ranks start may outlive gculaunch "
        "if it is killed",
        started.error().what);
  }
  open_files_ = rendezvous::RaiseOpenFileLimit();
  if (!open_files_.error.empty()) {
    log_.debug("could not raise the open-file limit from {}: {}", open_files_.before,
               open_files_.error);
  }
  // Released for the look at /proc that teardown needs when the table is full.
  sys::ReserveDescriptors(kReservedDescriptors);
}

// The store's connections may use what the launch itself does not: per rank two pipes, two
// log files and a pidfd, plus the reserve and a margin for logs, sockets and the loop.
std::size_t Launch::StoreConnectionCap() const {
  const std::uint64_t limit = open_files_.now == 0 ? 1024 : open_files_.now;
  const std::uint64_t own =
      kReservedDescriptors + 64 + 8 * static_cast<std::uint64_t>(spec_.nproc_per_node);
  const std::uint64_t cap = limit > own + 16 ? limit - own : 16;
  return static_cast<std::size_t>(std::min<std::uint64_t>(cap, kMaxStoreConnections));
}

// What the store's refusal at the cap tells the user to change: a launch has no flag for the
// cap (that is `gculaunch store --max-connections`), it follows the open-file limit, which
// gculaunch already raised to the hard limit.  Nothing helps beyond kMaxStoreConnections.
std::string Launch::StoreConnectionCapHint() const {
  if (StoreConnectionCap() >= kMaxStoreConnections) return "";
  const std::uint64_t limit = open_files_.now == 0 ? 1024 : open_files_.now;
  return "raise `ulimit -n` (now " + std::to_string(limit) + ")";
}

// Proxied ranks (--store-proxy) hold no descriptor at node 0: their cap is the job's own need,
// two connections per torch 1.13 rank, never below the direct cap's ceiling.
std::size_t Launch::StoreStreamCap() const {
  const std::uint64_t need = 2 * static_cast<std::uint64_t>(spec_.world_size) + 64;
  return static_cast<std::size_t>(std::max<std::uint64_t>(need, kMaxStoreConnections));
}

// A store that will have to refuse the job's own ranks is known before the first rank starts,
// so it is said then, once, with the number to set, rather than as refusals in the middle of
// init_process_group.  What the job may open: torch 1.13's ranks keep two connections each (the
// client and its WAIT callback), later torch one; every node's agent two more (control and
// watch), and a margin for `gculaunch status`, probes and reconnects.  The world size is the
// largest the job can reach.  With --store-proxy only node 0's own ranks connect directly,
// every other node (its ranks and its agent) through its proxy's one upstream connection.
void Launch::WarnIfStoreTooSmall() const {
  const std::uint64_t direct_ranks = spec_.store_proxy
                                         ? static_cast<std::uint64_t>(spec_.nproc_per_node)
                                         : static_cast<std::uint64_t>(spec_.world_size);
  const std::uint64_t per_node = spec_.store_proxy ? 1 : 2;
  const std::uint64_t need =
      2 * direct_ranks + per_node * static_cast<std::uint64_t>(spec_.nnodes) + 16;
  const std::uint64_t cap = StoreConnectionCap();
  if (cap >= need) return;
  const std::uint64_t limit = open_files_.now == 0 ? 1024 : open_files_.now;
  if (need > kMaxStoreConnections) {
    log_.warn(
        "the store serves at most {} connections, and a job of {} ranks on {} nodes may open up "
        "to {} (fix: --store-proxy on every node, or expect refused connections at start-up)",
        kMaxStoreConnections, spec_.world_size, spec_.nnodes, need);
    return;
  }
  const std::uint64_t set = limit + (need - cap);
  log_.warn(
      "the store can hold {} connections under the open-file limit {}, and a job of {} ranks on "
      "{} nodes may open up to {} (fix: raise the hard open-file limit of node 0 to at least {}: "
      "`ulimit -Hn {}` before gculaunch, LimitNOFILE= in a systemd unit, or the container's "
      "nofile ulimit{})",
      cap, limit, spec_.world_size, spec_.nnodes, need, set, set,
      spec_.store_proxy ? "" : "; or --store-proxy on every node");
}

// Once a second while the job runs: a lost or stuck guardian is replaced (guardian.h).
void Launch::WatchGuardian(boost::asio::steady_timer& timer) {
  if (!guardian_) return;
  timer.expires_after(std::chrono::seconds(1));
  timer.async_wait([this, &timer](const boost::system::error_code& ec) {
    if (!ec && guardian_->Maintain()) WatchGuardian(timer);
  });
}

// ---- launch-time choices ----

bool Launch::ChooseAtLaunch() {
  LaunchChoices choices;
  choices.generated_run_id = spec_.run_id.empty() ? NewRunId() : spec_.run_id;
  choices.launcher_pid = std::to_string(::getpid());  // the ranks' parent (--python-shim)
  if (Status port = ReservePort(choices); !port.ok()) {
    PrintError(port.error());
    return false;
  }
  if (Status metrics = BindMetricsPort(); !metrics.ok()) {
    PrintError(metrics.error());
    return false;
  }
  if (!MakeScratchDir(choices)) return false;
  runtime_ = ResolveRankRuntime(spec_, choices);
  if (WantsLogFiles(spec_)) {
    auto root = MakeRunLogDir(runtime_.run_id);
    if (!root.ok()) {
      PrintError(root.error());
      return false;
    }
    log_dir_ = std::move(*root);
    runtime_.log_root = log_dir_->PathOf();  // the dry run states it as RunLogRoot()
  }
  LogLayout();
  if (spec_.python_shim) {
    // Once per run; every attempt's ranks load it from there.
    if (Status written =
            sys::WriteSiteDir("--python-shim", PythonShimDir(runtime_), PythonShimFiles());
        !written.ok()) {
      PrintError(written.error());
      return false;
    }
  }
  if (spec_.stack_dumps) {
    if (Status written =
            sys::WriteSiteDir("--stack-dumps", StackHookDir(runtime_), StackHookFiles());
        !written.ok()) {
      PrintError(written.error());
      return false;
    }
  }
  if (spec_.warm_ranks) {
    Status written =
        sys::WriteSiteDir("--warm-ranks", WarmStandbyDir(runtime_), WarmStandbyFiles());
    if (written.ok()) written = sys::WriteSiteDir("--warm-ranks", StandbyReadyDir(runtime_), {});
    if (!written.ok()) {
      PrintError(written.error());
      return false;
    }
  }
  if (!spec_.omp_num_threads_default.empty()) {
    log_.info("OMP_NUM_THREADS={} for every rank (not set in the environment; set it to choose)",
              spec_.omp_num_threads_default);
  }
  return true;
}

// The agent store's port is bound now and kept (port 0: the free port the kernel picked is
// the one the ranks get), after the guardian fork so that the guardian never holds it.
// Without the agent store a single node picks a free port for rank 0's store.
Status Launch::ReservePort(LaunchChoices& choices) {
  if (HostsAgentStore(spec_)) {
    auto bound = BindStorePort(spec_);
    if (!bound.ok()) return bound.error();
    if (spec_.master_port == 0) choices.chosen_port = std::to_string(bound->port());
    store_socket_.emplace(std::move(*bound));
  } else if (spec_.master_port == 0 && spec_.nnodes == 1) {
    auto port = sys::PickFreePort();
    if (!port.ok()) return port.error();
    choices.chosen_port = std::to_string(*port);
  }
  if (ProxiesStore(spec_)) {
    // Loopback only: the proxy serves this node's own ranks.
    auto bound = rendezvous::ListenSocket::Bind(kProxyAddress, 0);
    if (!bound.ok()) return bound.error();
    choices.proxy_port = std::to_string(bound->port());
    proxy_socket_.emplace(std::move(*bound));
  }
  return OkStatus();
}

// --metrics-port is bound now, before the ranks exist, so that a port in use ends the launch
// with one line.  Port 0: the free port the kernel picked is logged.
Status Launch::BindMetricsPort() {
  if (!spec_.metrics_port) return OkStatus();
  auto bound =
      MetricsHttpServer::Bind(spec_.metrics_addr, static_cast<std::uint16_t>(*spec_.metrics_port));
  if (!bound.ok()) return bound.error();
  const std::string& a = bound->address();
  log_.info("metrics: http://{}:{}/metrics", a.find(':') != std::string::npos ? "[" + a + "]" : a,
            bound->port());
  metrics_socket_.emplace(std::move(*bound));
  return OkStatus();
}

// Every file a rank opens by name (error, stacks and heartbeat files, the hook and the
// shim it imports, the default watchdog timer) goes to a new private directory, which the
// guardian (or Teardown) removes: in $XDG_RUNTIME_DIR when it is the user's own, else in
// TMPDIR or /tmp, which only the user and root may change (sticky /tmp passes).  False, with
// the reason logged, when there is none.
bool Launch::MakeScratchDir(LaunchChoices& choices) {
  std::string parent = sys::PrivateRuntimeDir(env_.GetOr("XDG_RUNTIME_DIR", ""), ::geteuid());
  if (parent.empty()) parent = env_.GetOr("TMPDIR", "");
  if (parent.empty()) parent = "/tmp";
  if (auto foreign = sys::FindForeignWriter(parent, ::geteuid())) {
    log_.error(
        "cannot keep the ranks' files in {}: {}; another user could swap them (fix: set "
        "TMPDIR to a directory only you and root can change)",
        parent, *foreign);
    return false;
  }
  std::string pattern = parent + "/gculaunch-" + choices.generated_run_id.substr(0, 8) + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    log_.error(
        "cannot create a temporary directory for the ranks' files in {}: {} (fix: set TMPDIR "
        "to a writable directory)",
        parent, std::strerror(errno));
    return false;
  }
  scratch_ = pattern;
  choices.scratch_dir = scratch_;
  if (guardian_) guardian_->RemoveAtExit(scratch_);
  return true;
}

// torchrun's layout: a new "<log_dir>/<run_id>_<random>" per run, so that a second run into
// the same --log-dir (or another node sharing it) never overwrites this one.  Without
// --log-dir (--redirects/--tee given), the base is a new "torchelastic_" temporary
// directory, kept after exit like torchrun's.
Result<sys::HeldDir> Launch::MakeRunLogDir(const std::string& run_id) {
  const bool given = !spec_.log_dir.empty();
  std::string base = spec_.log_dir;
  if (!given) base = env_.GetOr("TMPDIR", "").empty() ? "/tmp" : env_.GetOr("TMPDIR", "");
  if (auto foreign = sys::FindForeignWriter(base, ::geteuid())) {
    const std::string what = (given ? "--log-dir " : "the log directory's parent ") + base + ": " +
                             *foreign + "; that user could redirect the log files";
    if (!given || !spec_.allow_shared_log_dir) {
      return Error{what, given ? "choose a directory only you and root can change, or pass "
                                 "--allow-shared-log-dir to accept the risk"
                               : "set TMPDIR to a directory only you and root can change"};
    }
    log_.warn(
        "{} (--allow-shared-log-dir: gculaunch writes only its own log files there, "
        "through descriptors)",
        what);
  }
  auto dir = sys::HeldDir::Open(base);
  if (dir.ok() && !given) dir = dir->MakeUniqueChild("torchelastic_");
  if (dir.ok()) dir = dir->MakeUniqueChild(run_id + "_");
  if (!dir.ok()) {
    return Error{dir.error().what, given ? "choose a writable --log-dir"
                                         : "set TMPDIR to a writable directory, or pass --log-dir"};
  }
  log_.info("rank logs and error files: {}", dir->PathOf());
  return dir;
}

// The layout names the port as the dry run does; by now it is known.
std::string Launch::Layout() const {
  std::string layout = spec_.layout;
  const std::string placeholder = kPortPlaceholder;
  if (auto at = layout.find(placeholder); at != std::string::npos) {
    layout.replace(at, placeholder.size(), runtime_.master_port);
  }
  return layout;
}

void Launch::LogLayout() {
  if (!spec_.layout.empty()) log_.info("{}", Layout());
}

// The launch event's fields (docs/operations.md).
nlohmann::json Launch::LaunchFields() const {
  return {{"run_id", runtime_.run_id},
          {"node_rank", spec_.node_rank},
          {"host", sys::HostName()},
          {"pid", static_cast<int>(::getpid())},
          {"nnodes", spec_.nnodes},
          {"nproc_per_node", spec_.nproc_per_node},
          {"max_restarts", spec_.max_restarts},
          {"master_addr", spec_.master_addr},
          {"master_port", runtime_.master_port},
          {"layout", Layout()},
          {"log_dir", runtime_.log_root}};
}

// ---- the event loop ----

int Launch::RunLoop() {
  Loop loop(*this);
  loop.events.On(JobEvent::Launch(LaunchFields()));
  // Declared after the Loop and so destroyed before it: its parts use the Loop's objects.
  auto cluster = MakeClusterNode(spec_, runtime_,
                                 ClusterNodeContext{.io = loop.io,
                                                    .planner = loop.planner,
                                                    .store = loop.store ? &*loop.store : nullptr,
                                                    .proxy = loop.proxy ? &*loop.proxy : nullptr,
                                                    .hooks = loop.hooks.get(),
                                                    .events = &loop.events,
                                                    .log = log_});
  if (!cluster.ok()) {
    log_.error("{} (fix: {})", cluster.error().what, cluster.error().hint);
    CloseLoop(loop);
    return EarlyExit(Outcome::kUsage, exit_code::kUsage, cluster.error().Format());
  }
  // The ranks' interpreter, run once for the cache (sys::TorchProbe), starts once the ranks
  // had time to start: even at the lowest priority a pyenv shim's twenty-odd shell processes
  // slowed a launch of 4 short ranks by about 130 ms when they ran alongside the ranks' start.
  boost::asio::steady_timer probe_start(loop.io, kTorchProbeDelay);
  if (options_.torch_probe != nullptr) {
    probe_start.async_wait([probe = options_.torch_probe](const boost::system::error_code& ec) {
      if (!ec) probe->Begin();
    });
  }
  const int code = Supervise(loop, **cluster);
  probe_start.cancel();
  CloseLoop(loop);
  return code;
}

int Launch::Supervise(Loop& loop, ClusterNode& cluster) {
  WorkerGroupDeps deps{loop.io,
                       loop.spawner,
                       loop.watcher,
                       loop.writer,
                       loop.flow,
                       guardian_ ? &*guardian_ : nullptr,
                       loop.console_out,
                       loop.console_err,
                       std::chrono::milliseconds(250),
                       SecondsToMillis(spec_.progress_interval_s)};
  deps.standbys = loop.standbys ? &*loop.standbys : nullptr;
  const FileSystemDeviceProbe probe(spec_.sysroot);
  const std::unique_ptr<HealthRunner> health = MakeHealthRunner(spec_, env_, loop.io, probe);
  SupervisorConfig config = loop.config;
  config.health = health.get();
  Supervisor supervisor(std::move(deps), log_, config, loop.planner, cluster.attempt_observer(),
                        cluster.job_link());
  cluster.Start(supervisor);
  loop.supervisor = &supervisor;
  boost::asio::steady_timer guardian_timer(loop.io);
  WatchGuardian(guardian_timer);
  StackDumper dumper(loop.io, StackDumper::Options{});
  const JobStacks stacks = cluster.ShareStacks(DumpThisNode(supervisor, dumper));
  std::unique_ptr<ControlSocket> control = ListenForControl(loop, stacks);
  std::unique_ptr<FileTimerServer> file_timer = ServeFileTimer(loop, supervisor);
  if (spec_.hang_timeout_s > 0) {
    cluster.WatchHangs(supervisor, stacks, HangWatchDeps{dumper, loop.writer, loop.console_err},
                       HangWatchConfig{spec_.hang_timeout_s, spec_.hang_grace_s, spec_.on_hang,
                                       log_dir_, &loop.events});
  }
  const JobOutcome outcome = supervisor.Run();
  guardian_timer.cancel();
  cluster.Finish(ByeBound(loop));
  if (loop.store) loop.store->Stop();
  if (loop.proxy) loop.proxy->Stop();  // the ranks are gone: nothing is left to forward
  loop.supervisor = nullptr;
  // Dismissed standbys: their groups must be gone too before the guardian hears "done".
  const bool standbys_gone = !loop.standbys || loop.standbys->Drain(kStandbyDrainBound);
  all_groups_empty_ = outcome.groups_empty && outcome.stuck.empty() && standbys_gone;
  const int code = Report(loop, cluster, outcome);
  // After the report: a scrape in between sees the outcome (gculaunch_outcome).
  if (loop.metrics) loop.metrics->Stop();
  return code;
}

// TORCHELASTIC_ENABLE_FILE_TIMER=1 (file_timer.h).  An expired timer's signal goes only to a
// running rank or a process in a running rank's group (torchrun signals any pid it is sent).
std::unique_ptr<FileTimerServer> Launch::ServeFileTimer(Loop& loop, Supervisor& supervisor) {
  if (!spec_.file_timer) return nullptr;
  const std::string path = FileTimerPath(spec_, runtime_);
  auto reaper = [this, &supervisor](const FileTimerRequest& expired) {
    int rank = -1;
    if (supervisor.group() != nullptr) {
      sys::ProcInfo info;
      const bool known = sys::ReadProcInfo(expired.pid, &info);
      for (const StackTarget& t : supervisor.group()->StackTargets()) {
        if (t.pid > 0 && known && (t.pid == expired.pid || t.pid == info.pgid)) rank = t.rank;
      }
    }
    if (rank < 0) {
      log_.warn(
          "TORCHELASTIC_ENABLE_FILE_TIMER: timer '{}' of pid {} expired, but that pid is "
          "not a rank of this job (or in a rank's process group): not signalled",
          expired.scope_id, expired.pid);
      return;
    }
    log_.warn(
        "TORCHELASTIC_ENABLE_FILE_TIMER: timer '{}' of pid {} (rank {}) expired: sending "
        "it {}",
        expired.scope_id, expired.pid, rank, SignalName(expired.signal));
    sys::SignalProcess(expired.pid, expired.signal);
  };
  auto server = FileTimerServer::Start(loop.io, path, std::move(reaper));
  if (!server.ok()) {
    log_.warn("{} (fix: {}); the ranks' timers will not fire", server.error().what,
              server.error().hint);
    return nullptr;
  }
  (*server)->set_warn([this](const std::string& line) { log_.warn("{}", line); });
  log_.info("TORCHELASTIC_ENABLE_FILE_TIMER: serving the ranks' timers on {}", path);
  return std::move(*server);
}

// This node's stacks, as `gculaunch stacks` and a hang report title them; the ClusterNode adds
// the other nodes' where this node gathers them (cluster_node.h).
ClusterNode::LocalStacks Launch::DumpThisNode(Supervisor& supervisor, StackDumper& dumper) const {
  const std::string title = "stacks of run " + runtime_.run_id + ", node " +
                            std::to_string(spec_.node_rank) + " (" + sys::HostName() +
                            "), gculaunch pid " + std::to_string(::getpid());
  const int node_rank = spec_.node_rank;
  return [&supervisor, &dumper, title, node_rank](std::function<void(NodeStacks)> done) {
    std::vector<StackTarget> targets;
    if (supervisor.group() != nullptr) targets = supervisor.group()->StackTargets();
    dumper.Dump(std::move(targets),
                [done = std::move(done), title, node_rank](std::vector<StackDump> dumps) {
                  done(NodeStacks{node_rank, title, std::move(dumps), ""});
                });
  };
}

// `gculaunch stacks` (and status) reach this launch here (control_socket.h): a path socket
// in the user's 0700 control directory, removed at exit and by the guardian after a kill -9.
// A directory that fails its checks costs only the socket: the job runs, with a warning.
// The answer's first line is "dumped <n> of <m>" (a node that did not answer counts its
// --nproc-per-node ranks as not dumped), the report follows.
std::unique_ptr<ControlSocket> Launch::ListenForControl(Loop& loop, JobStacks stacks) {
  std::string dir = ControlDirPath(env_.GetOr("XDG_RUNTIME_DIR", ""), ::geteuid());
  const auto warn = [this](const Error& error) {
    log_.warn("{} (fix: {}); gculaunch stacks will not reach this launch", error.what, error.hint);
  };
  if (Status checked = CheckControlDir(dir, true); !checked.ok()) {
    // Another user's (squatted): a private directory instead, which the clients find too.
    auto own = ControlDirOfAnotherUser(dir)
                   ? MakePrivateControlDir(kPrivateControlParent, ::geteuid())
                   : Result<std::string>(checked.error());
    if (!own.ok()) {
      warn(own.error());
      return nullptr;
    }
    log_.warn(
        "{}; this launch's control socket is in {} instead, where gculaunch status and "
        "stacks find it (fix: {})",
        checked.error().what, *own, checked.error().hint);
    if (guardian_) guardian_->RemoveAtExit(*own);
    dir = *own;
  }
  const std::string path =
      dir + "/" + ControlSocketFileName(runtime_.run_id, spec_.node_rank, ::getpid());
  auto control = ControlSocket::Listen(loop.io, path);
  if (!control.ok()) {
    warn(control.error());
    return nullptr;
  }
  if (guardian_) guardian_->UnlinkAtExit(path);
  (*control)->set_warn([this](const std::string& line) { log_.warn("{}", line); });
  const int nproc = spec_.nproc_per_node;
  (*control)->Register(
      "stacks", [stacks = std::move(stacks), nproc](const std::vector<std::string>&,
                                                    const ControlSocket::Reply& reply) {
        stacks([reply, nproc](const std::vector<NodeStacks>& parts) {
          size_t dumped = 0;
          size_t total = 0;
          for (const NodeStacks& part : parts) {
            total += part.missing.empty() ? part.dumps.size() : static_cast<size_t>(nproc);
            dumped += static_cast<size_t>(std::count_if(part.dumps.begin(), part.dumps.end(),
                                                        [](const StackDump& d) { return d.ok; }));
          }
          reply("dumped " + std::to_string(dumped) + " of " + std::to_string(total) + "\n" +
                FormatJobStackReport(parts));
        });
      });
  (*control)->Register("status",
                       [&loop](const std::vector<std::string>&, const ControlSocket::Reply& reply) {
                         reply(loop.StatusNow() + "\n");  // `gculaunch status` (status_view.h)
                       });
  log_.debug("control socket {}", path);
  return std::move(*control);
}

// How long a node waits after its ranks' end for the other nodes to say bye: a node stuck in
// its teardown has the grace period and the kill wait, and a margin.
std::chrono::steady_clock::time_point Launch::ByeBound(const Loop& loop) const {
  if (spec_.exit_barrier_timeout_s) {  // --exit-barrier-timeout (torch's name for this wait)
    return std::chrono::steady_clock::now() +
           std::chrono::duration_cast<std::chrono::steady_clock::duration>(
               std::chrono::duration<double>(*spec_.exit_barrier_timeout_s));
  }
  return std::chrono::steady_clock::now() + loop.config.grace + loop.config.kill_wait +
         std::chrono::seconds(30);
}

// ---- exit summary ----

int Launch::EarlyExit(Outcome outcome, int rank_code, const std::string& line) {
  const int code = SchemeExitCode(spec_.exit_scheme, outcome, rank_code);
  WriteTermination(EarlyTerminationMessage(outcome, code, line));
  return code;
}

// --termination-log (sys/termination_log.h); a failure costs a warning, never the exit code.
void Launch::WriteTermination(const std::string& text) {
  const std::string path = sys::ChooseTerminationLog(spec_.termination_log);
  if (path.empty()) return;
  if (Status written = sys::WriteTerminationLog(path, text); !written.ok()) {
    log_.warn("{} (fix: {})", written.error().what, written.error().hint);
  }
}

int Launch::Report(Loop& loop, const ClusterNode& cluster, const JobOutcome& outcome) {
  SummaryInput in = SummaryInputOf(spec_, runtime_, outcome, loop.watcher.mode_name());
  in.exit_scheme = spec_.exit_scheme;
  // The count includes the ranks' last output, unless a console that does not drain holds it.
  (void)loop.writer.WaitDrained(std::chrono::seconds(2));
  in.log_bytes_dropped = loop.writer.log_bytes_dropped();
  cluster.DescribeJobEnd(in);
  const ExitSummary summary = BuildExitSummary(in);
  loop.events.On(JobEvent::Stop(summary.exit_code, summary.outcome, outcome.exit_code));
  for (const std::string& line : summary.text) {
    loop.writer.Urgent(loop.console_err, "gculaunch: " + line + "\n");
  }
  if (!spec_.summary_json.empty()) {
    // Rank output may hold invalid UTF-8: replace it rather than throw.
    const std::string text =
        summary.json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
    if (auto w = WriteTextFile(spec_.summary_json, text + "\n"); !w.ok()) {
      log_.warn("--summary-json: {}", w.error().what);
    }
  }
  if (!spec_.error_file_parent.empty() && summary.parent_error) {
    const std::string text =
        summary.parent_error->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (auto w = WriteTextFile(spec_.error_file_parent, text + "\n"); !w.ok()) {
      log_.warn("TORCHELASTIC_ERROR_FILE: {}", w.error().what);
    }
  }
  WriteTermination(summary.termination_message);
  return summary.exit_code;
}

void Launch::CloseLoop(Loop& loop) {
  if (loop.rank0_terminal) sys::ReclaimTerminal();
  sink_.Detach();
  if (!loop.writer.Finish(options_.output_flush)) {
    const std::string note =
        "gculaunch: warning: the console did not accept all output in time; the rest is "
        "lost\n";
    (void)!::write(STDERR_FILENO, note.data(), note.size());
  }
}

// The guardian is reaped before gculaunch exits: when gculaunch's exit status is visible,
// nothing it started is left (docs/runtime.md), except unkillable ranks (exit 5).
void Launch::Teardown() {
  if (guardian_) {
    // "done": it removes the scratch directory and exits; else it SIGKILLs what is left,
    // once more, and cleans up.
    const bool reaped = all_groups_empty_ ? guardian_->Done() : guardian_->Abandon();
    if (!reaped) {
      log_.warn("the guardian process (pid {}) did not exit within {} ms; it finishes on its own",
                guardian_->pid(), sys::Guardian::kReapBound.count());
    }
  } else if (!scratch_.empty()) {
    std::error_code ec;
    fs::remove_all(scratch_, ec);
  }
}

int RunLaunch(const LaunchSpec& spec, const EnvMap& env, spdlog::logger& log, LogSink& sink,
              const LaunchOptions& options) {
  // Who hosts the store is decided once, before the launch binds anything (store_host.h).
  const LaunchSpec decided = DecideStoreHost(spec, ThisHostFacts(true));
  return Launch(decided, env, log, sink, options).Run();
}

}  // namespace gculaunch
