// HealthRunner: runs this node's health checks (launcher/frontend/device_health.h) without
// stopping the event loop, and hands one HealthReport back.
//
//   HealthRunner health(io, plan, probe);
//   health.Check(attempt, [](HealthReport report) { ... });   // on the io_context
//
// A check starts the vendor tool's full query and the --health-check command at once (each
// through RunningCommand: its own process group, killed at its timeout), judges the built-in
// rows (a directory listing and a stat) meanwhile, and polls the children every kPoll on a
// timer, so the loop goes on serving the store and the signals; a full query the tool refuses
// as a whole is asked again field by field, all fields at once.  Nothing is read from a
// child's output until it exited (it waits in the pipe; the tools write a few hundred bytes).
// The environment of both commands is the plan's (gculaunch's own), plus
// GCULAUNCH_HEALTH_CARDS (the pool, comma-separated) and GCULAUNCH_HEALTH_ATTEMPT.
//
// After a teardown (Check's `reclaim`), where the profile names a memory field
// (HealthToolSpec::memory) and --device-memory-wait is above 0, the check also waits until every
// card of the pool holds less than the profile's threshold: the tool's memory query is asked
// again every kMemoryPoll until it says so or the bound passes (a query started before it may
// run to the tool's timeout); the report's `memory` says how it went.  The other checks run
// meanwhile; the wait never makes a card unhealthy.
//
// Lifetime: Check() while one runs abandons the old one (its children are killed and reaped);
// so do Cancel() and the destructor.  `done` runs on the io_context, at most once per Check,
// never after Cancel() or the destructor.
// Thread safety: io_context thread only, and that thread must be the main thread (the
// parent-death signal of RunningCommand's children follows the thread that forked).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/env_map.h"
#include "launcher/frontend/device_health.h"
#include "launcher/frontend/launch_spec.h"

namespace gculaunch {

class RunningCommand;  // command_runner.h

/// What a node checks, decided once at launch.
struct HealthPlan {
  DeviceProfile profile;           ///< built-in checks, and the tool (`profile.health`)
  std::vector<std::string> cards;  ///< the node's card pool (LaunchSpec::device_pool)
  std::string tool_path;           ///< the tool found on PATH; empty: not installed
  std::string path_var;            ///< PATH, for the "not installed" row
  std::string command;             ///< --health-check (a path); empty: none
  std::string command_name;        ///< as given, for messages
  double command_timeout_s = 30;   ///< --health-check-timeout
  double memory_wait_s = 0;        ///< --device-memory-wait; 0: no wait for device memory
  EnvMap env;                      ///< gculaunch's environment
};

/// The plan of the node `spec` describes; nullopt when nothing would be checked (a profile
/// without cards or tool, no --health-check).  `env`: gculaunch's own environment.
std::optional<HealthPlan> HealthPlanFor(const LaunchSpec& spec, const EnvMap& env);

class HealthRunner {
 public:
  using Done = std::function<void(HealthReport)>;
  static constexpr std::chrono::milliseconds kPoll{5};
  /// Between two memory queries while a card still holds memory (the driver frees a dead
  /// context's memory within about a second; the tool itself takes tens of ms).
  static constexpr std::chrono::milliseconds kMemoryPoll{100};

  /// `probe` must outlive the runner.  The device files present now are the ones a later
  /// check expects.
  HealthRunner(boost::asio::io_context& io, HealthPlan plan, const DeviceProbe& probe);
  ~HealthRunner();
  HealthRunner(const HealthRunner&) = delete;
  HealthRunner& operator=(const HealthRunner&) = delete;

  /// Runs every check for the attempt about to start (`attempt`: its restart count);
  /// `reclaim`: an attempt tore down on this node, wait for its device memory too.
  void Check(int attempt, Done done, bool reclaim = false);
  /// Abandons the check under way, if any.
  void Cancel();
  /// A check is under way.
  bool busy() const { return static_cast<bool>(done_); }

 private:
  struct Pending;
  struct MemoryPoll;
  void StartTool(const std::vector<HealthQuery>& queries, int attempt);
  std::unique_ptr<RunningCommand> Spawn(const std::string& path,
                                        const std::vector<std::string>& args, double timeout_s,
                                        int attempt) const;
  void Poll();
  void Collect();
  bool CollectDone(Pending& p) const;
  std::unique_ptr<Pending> StartPending(const std::vector<std::string>& args, double timeout_s,
                                        int attempt) const;
  bool MemoryDone();
  void EndMemory(std::chrono::steady_clock::time_point now);
  void Report();

  boost::asio::io_context& io_;
  HealthPlan plan_;
  const DeviceProbe& probe_;
  std::vector<std::string> device_ids_;
  boost::asio::steady_timer poll_;
  Done done_;
  int attempt_ = 0;
  std::vector<HealthRow> builtin_;
  std::vector<HealthQuery> queries_;
  std::vector<std::unique_ptr<Pending>> tool_;
  std::unique_ptr<Pending> command_;
  std::unique_ptr<MemoryPoll> memory_;
  /// Bumped by Cancel(); a handler holding an older value (or none: the runner is gone) does
  /// nothing.
  std::shared_ptr<uint64_t> generation_ = std::make_shared<uint64_t>(0);
};

}  // namespace gculaunch
