// Launch: one gculaunch process's launch of a LaunchSpec, from guardian to exit code; RunLaunch
// runs one.  (The job is the whole training run: every node and every attempt.  A launch is
// this node's part of it; with several nodes, launcher/cluster/cluster_node.h joins it to the
// others.)
//
// Launch::Run takes these steps, each a method of its own:
//   1. SetUpProcess     stdio open, SIGPIPE ignored, SIGCHLD default; then the script is
//                       checked (CheckScript in launch.cc).  (The ranks' interpreter and torch
//                       are already in the spec: LauncherMain took them from the cache or the
//                       interpreter's files; after a miss the probe is due, begun on the
//                       event loop a second later: LaunchOptions::torch_probe, sys::TorchProbe)
//   2. StartGuardian    the guardian forked (still single-threaded, no socket yet)
//   3. ChooseAtLaunch   launch-time choices: run id, the store's port bound (or a free port
//                       picked), the scratch directory for error files, the run's log
//                       directory, the ranks' runtime values, the layout line, and the site
//                       directories the ranks load (--python-shim, --stack-dumps,
//                       --warm-ranks) written
//   4. Loop (built by its constructor): the event loop and what lives on it: io_context,
//                       output writer thread, ChildWatcher, Spawner, the warm standbys,
//                       RankPlanner, the event hub with the status and the event log, the
//                       Supervisor's settings, the store's connection hooks, the agent
//                       store, the metrics server
//   5. ClusterNode      MakeClusterNode (launcher/cluster/cluster_node.h) makes this node's
//                       place: a single node's, or a node of a job on its rendezvous backend
//   6. Supervise        the Supervisor runs the ranks to their end; the ClusterNode's Finish
//                       then waits (bounded, several nodes) until every node said bye
//   7. Report           the exit summary: stderr text, --summary-json, the parent launcher's
//                       TORCHELASTIC_ERROR_FILE, the termination message (--termination-log);
//                       the exit code under --exit-codes (base/outcome.h)
//   8. CloseLoop        the terminal reclaimed, the log sink detached, the console drained
//      ConfirmTorchProbe the background probe's answer taken if it is there (for the cache;
//                       a line when it differs from what the launch used), else it is stopped
//   9. Teardown         the guardian told "done" (every group empty) or abandoned, and reaped
//                       (bounded) before gculaunch exits; without a guardian the scratch
//                       directory is removed here
// A step that makes the launch impossible prints why and writes the termination message
// (EarlyExit); Run returns the exit code under --exit-codes.
//
// Ownership and lifetimes, outermost first:
//   * Launch: the guardian, the store's bound socket (until the agent store takes it), the
//     scratch directory's path and the ranks' runtime values, for the whole of Run.  On an
//     early return or an exception the guardian's destructor closes it without "done", so it
//     kills every group that was started, and reaps it.
//   * Loop (a local of RunLoop): the io_context and every object that runs on it, declared in
//     construction order and destroyed in reverse, the io_context last.  A new event-loop
//     service (a status socket, metrics) becomes a member here.
//   * ClusterNode (a local of RunLoop, declared after the Loop and so destroyed before it): the
//     agent, the coordinator, their boards and links, which hold references into the Loop.
//   * Supervisor (a local of Supervise): lives until the summary is written, because
//     destroying it closes the ranks' output streams, which flush their last partial lines.
//   The borrowed spec, environment, logger, sink and options must outlive the Launch.
//
// Thread safety: main thread only; a Launch runs once.
#pragma once

#include <spdlog/logger.h>

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/env_map.h"
#include "base/outcome.h"
#include "launcher/cluster/cluster_node.h"
#include "launcher/frontend/launch_spec.h"
#include "launcher/frontend/rank_env.h"
#include "launcher/ops/control_socket.h"
#include "launcher/ops/file_timer.h"
#include "launcher/ops/stack_dumper.h"
#include "launcher/ops/stack_report.h"
#include "launcher/run/logging.h"
#include "launcher/run/supervisor.h"
#include "launcher/sys/guardian.h"
#include "launcher/sys/held_dir.h"
#include "launcher/sys/torch_probe.h"
#include "rendezvous/listener.h"
#include "rendezvous/store_command.h"

namespace gculaunch {

struct LaunchOptions {
  bool force_sigchld = false;                     ///< GCULAUNCH_CHILD_WATCHER=sigchld
  std::chrono::milliseconds kill_wait{5000};      ///< SIGKILL -> stuck report
  std::chrono::milliseconds output_flush{10000};  ///< at exit, for a console that does not drain
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  /// The probe LauncherMain started for this launch's interpreter (torch_probe.h), or null;
  /// the launch takes its answer at the end when it is there, and never waits for it.
  sys::TorchProbe* torch_probe = nullptr;
};

struct JobOutcome;

class Launch {
 public:
  /// Borrows every argument for the Launch's lifetime.
  Launch(const LaunchSpec& spec, const EnvMap& env, spdlog::logger& log, LogSink& sink,
         const LaunchOptions& options);
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;

  /// Runs the launch; returns gculaunch's exit code (exit_codes.h).  REQUIRES: called once.
  int Run();

 private:
  struct Loop;

  void SetUpProcess();
  void ConfirmTorchProbe();
  void StartGuardian();
  void WatchGuardian(boost::asio::steady_timer& timer);
  std::size_t StoreConnectionCap() const;
  std::string StoreConnectionCapHint() const;
  std::size_t StoreStreamCap() const;
  void WarnIfStoreTooSmall() const;
  bool ChooseAtLaunch();
  Status ReservePort(LaunchChoices& choices);
  Status BindMetricsPort();
  bool MakeScratchDir(LaunchChoices& choices);
  Result<sys::HeldDir> MakeRunLogDir(const std::string& run_id);
  std::string Layout() const;
  void LogLayout();
  nlohmann::json LaunchFields() const;
  int RunLoop();
  /// `cluster`: this node's place (launcher/cluster/cluster_node.h), a single node's too.
  int Supervise(Loop& loop, ClusterNode& cluster);
  std::unique_ptr<FileTimerServer> ServeFileTimer(Loop& loop, Supervisor& supervisor);
  /// Calls back with the job's stacks: this node's part, and on the node that gathers them
  /// every other node's (launcher/cluster/cluster_node.h).
  using JobStacks = ClusterNode::JobStacks;
  /// Dumps this node's ranks, as `gculaunch stacks` shows them.
  ClusterNode::LocalStacks DumpThisNode(Supervisor& supervisor, StackDumper& dumper) const;
  std::unique_ptr<ControlSocket> ListenForControl(Loop& loop, JobStacks stacks);
  std::chrono::steady_clock::time_point ByeBound(const Loop& loop) const;
  /// Returns the code gculaunch exits with (--exit-codes).
  int Report(Loop& loop, const ClusterNode& cluster, const JobOutcome& outcome);
  /// An exit before the ranks ran: the code under --exit-codes, and the termination message.
  int EarlyExit(Outcome outcome, int rank_code, const std::string& line);
  void WriteTermination(const std::string& text);
  void CloseLoop(Loop& loop);
  void Teardown();

  const LaunchSpec& spec_;
  const EnvMap& env_;
  spdlog::logger& log_;
  LogSink& sink_;
  const LaunchOptions& options_;

  std::optional<sys::Guardian> guardian_;
  rendezvous::OpenFileLimit open_files_;  ///< raised after the guardian started
  static constexpr int kReservedDescriptors = 8;
  std::optional<rendezvous::ListenSocket> store_socket_;    ///< bound here, served by the Loop
  std::optional<rendezvous::ListenSocket> metrics_socket_;  ///< --metrics-port, the same way
  std::optional<rendezvous::ListenSocket> proxy_socket_;    ///< --store-proxy, the same way
  std::string scratch_;  ///< every file a rank opens by name (private, removed at exit)
  std::optional<sys::HeldDir> log_dir_;  ///< the run's log directory; none without log files
  RankRuntime runtime_;
  bool all_groups_empty_ = false;  ///< no survivor of SIGKILL: the guardian may be told "done"
};

/// Runs the launch (a Launch); returns gculaunch's exit code (exit_codes.h).
int RunLaunch(const LaunchSpec& spec, const EnvMap& env, spdlog::logger& log, LogSink& sink,
              const LaunchOptions& options);

}  // namespace gculaunch
