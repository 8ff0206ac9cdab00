// StandbyPool: warm ranks (--warm-ranks).  One standby per local rank, started once an
// attempt's ranks run and while a restart is left: the rank's own command line and the part
// of its environment that does not change between attempts, plus the warm-standby hook
// (launcher/frontend/python/warm_standby/sitecustomize.py), which imports the --preload
// modules and then blocks on its stdin until the next attempt hands it its environment.
//
// A standby is a rank in waiting and follows the ranks' rules: its own process group
// (sys::Spawner), the guardian's list, the ChildWatcher; its zombie is released only once its
// group is known empty.  Its stdout and stderr pipes are read only from the go on, by the
// attempt it serves (what it printed before lands there).
//
// Priority: where gculaunch may raise it again (CAP_SYS_NICE, or an RLIMIT_NICE that allows
// it; checked once), a standby runs at nice +10 while it imports and waits, and every one of
// its threads is set back to gculaunch's nice value before the go; a thread that cannot be
// means a cold start, never a rank at low priority.
//
// Take() hands a standby to the next attempt only when it is faithful and ready: the same
// program, argv and CPUs, an environment that differs only in the per-attempt variables
// (warm_standby.h), no terminal or inherited stdin, alive, its preload done.  Otherwise the
// rank starts cold and Take() says why, in one line; a standby that was not taken is
// dismissed (its group killed).
//
// Lifetime: owned by the launch, outlives every WorkerGroup it hands standbys to; DismissAll()
// before the end of the run.  Thread safety: io_context thread only.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/lifetime.h"
#include "launcher/run/rank_record.h"
#include "launcher/sys/child_watcher.h"
#include "launcher/sys/guardian.h"
#include "launcher/sys/spawner.h"
#include "launcher/sys/unique_fd.h"
#include "launcher/sys/worker_exit.h"

namespace gculaunch {

/// What a standby needs besides the rank's launch (from the spec and the run).
struct StandbySettings {
  std::vector<std::string> preload;  ///< --preload modules
  std::string hook_dir;              ///< where the warm-standby hook was written
  std::string ready_dir;             ///< private directory for the ready files
  std::string parent_pid;            ///< gculaunch's pid (the hook acts only under it)
};

/// One standby as `gculaunch status` and /metrics show it.
struct StandbyStatus {
  int local_rank = 0;
  pid_t pid = 0;
  bool ready = false;                      ///< its preload is done
  std::optional<std::uint64_t> pss_bytes;  ///< its proportional set size; nullopt: unknown
};

/// A standby handed to an attempt: a running process that is now a rank.
struct AdoptedStandby {
  pid_t pid = 0;
  sys::UniqueFd out;  ///< read end of its stdout pipe
  sys::UniqueFd err;  ///< read end of its stderr pipe
  /// Where its exit is reported from now on (set it before the io_context runs again).
  std::shared_ptr<sys::ChildWatcher::ExitHandler> on_exit;
};

/// The variables a standby gets only at the go (they change from one attempt to the next):
/// RANK, WORLD_SIZE, MASTER_ADDR/PORT, TORCHELASTIC_RESTART_COUNT, RUN_ID, ERROR_FILE, the
/// stack and heartbeat files, ...  Every other variable must be the same as the cold rank's,
/// or the rank starts cold: a module imported while the standby waited (the OpenMP runtime,
/// torch.distributed) may have read it.
const std::vector<std::string>& PerAttemptVariables();
/// A standby's environment: `rank_env` without the per-attempt variables, the hook's
/// directory first on PYTHONPATH and the hook's GCULAUNCH_STANDBY_* variables.
std::vector<std::string> StandbyEnvironment(const std::vector<std::string>& rank_env,
                                            const StandbySettings& settings,
                                            const std::string& ready_file);
/// Why a standby cannot be started for a rank with `argv`: an interpreter option that keeps
/// the hook from loading (-E, -I: PYTHONPATH ignored; -S: no site import), which would run the
/// script at once instead of waiting; empty: it can.
std::string WhyNoHook(const std::vector<std::string>& argv);
/// Why a standby started for `standby_for` cannot serve `launch` ("its command line
/// changed", "its environment changed ... (OMP_NUM_THREADS)"); empty: it can.
std::string WhyNotWarm(const RankLaunch& standby_for, const RankLaunch& launch);

class StandbyPool {
 public:
  /// How much lower a standby's priority is while it waits (nice +10), where gculaunch can
  /// raise it again for every thread before the go (CAP_SYS_NICE or RLIMIT_NICE).
  static constexpr int kStandbyNice = 10;
  StandbyPool(boost::asio::io_context& io, sys::Spawner& spawner, sys::ChildWatcher& watcher,
              sys::Guardian* guardian, StandbySettings settings);
  ~StandbyPool();
  StandbyPool(const StandbyPool&) = delete;
  StandbyPool& operator=(const StandbyPool&) = delete;

  /// Starts a standby for every launch that has none; a launch that cannot be warm (a
  /// terminal, gculaunch's stdin) gets none.  A spawn that fails is logged through `note`
  /// and that rank starts cold.
  void Prepare(const std::vector<RankLaunch>& launches);
  /// The standby for `launch`'s local rank, told to go with `launch.env`; nullopt when there
  /// is none, or when it cannot serve (then the note says why the rank starts cold).
  std::optional<AdoptedStandby> Take(const RankLaunch& launch);
  /// Kills every standby's group (no restart left, or the run ends).
  void DismissAll();
  /// At the end of the run: dismisses every standby and waits (without the io_context) until
  /// their groups are empty, at most `bound`.  True when none is left.
  bool Drain(std::chrono::milliseconds bound);
  /// Standbys started and not yet taken or dismissed (alive or not).
  size_t size() const { return standbys_.size(); }
  /// Standbys whose preload is done (the ready file exists) and that are alive.
  size_t ready() const;
  /// The live standbys, with their memory (PSS: the pages they share with the ranks, the
  /// interpreter's and torch's libraries, count once between them).
  std::vector<StandbyStatus> Status() const;
  /// Groups of dismissed or dead standbys that still have members.
  size_t lingering() const { return lingering_.size(); }
  /// Where the one-line notes go (a warning each): a failed preload, a cold start and why.
  void set_note(std::function<void(const std::string&)> note) { note_ = std::move(note); }

 private:
  struct Standby;
  Standby* Start(const RankLaunch& launch);
  void OnExit(pid_t pid, WorkerExit exit);
  bool IsReady(const Standby& s) const;
  std::string FailureOf(const Standby& s) const;
  void Dismiss(int local_rank);
  void CheckLingering();

  boost::asio::io_context& io_;
  sys::Spawner& spawner_;
  sys::ChildWatcher& watcher_;
  sys::Guardian* guardian_;
  StandbySettings settings_;
  std::map<int, std::unique_ptr<Standby>> standbys_;  ///< by local rank
  std::map<pid_t, bool> lingering_;                   ///< pid -> its exit was reported
  boost::asio::steady_timer linger_timer_;
  int serial_ = 0;  ///< numbers the ready files
  std::function<void(const std::string&)> note_;
  /// gculaunch's nice value when it may raise a standby's priority back to it (checked once);
  /// nullopt: standbys run at the ranks' priority.
  std::optional<int> base_nice_;
  bool no_hook_noted_ = false;
  LifetimeGuard lifetime_;  ///< last member: expires first
};

}  // namespace gculaunch
