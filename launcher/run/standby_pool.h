// StandbyPool: warm ranks (--warm-ranks).  One standby per local rank, started once an
// attempt's ranks run and while a restart is left: the rank's own command line and the part
// of its environment that does not change between attempts, plus the warm-standby hook
// (launcher/frontend/python/warm_standby/sitecustomize.py), which imports the --preload
// modules and then blocks on its stdin until the next attempt hands it its environment.
//
// A standby is a rank in waiting and follows the ranks' rules: its own process group, the
// guardian's list, the ChildWatcher, its zombie released only once its group is known empty
// (sys::GroupTracker, shared with WorkerGroup).  Its stdin is a socket (sys/go_channel.h);
// its stdout and stderr pipes are read only from the go on, by the attempt it serves (what it
// printed before lands there).
//
// Priority, so that standbys never compete with the ranks they stand beside.  Where gculaunch
// may raise it again (CAP_SYS_NICE, or an RLIMIT_NICE that allows it; checked once), a standby
// starts at nice +10 and SCHED_IDLE (it runs only on CPU time nothing else wants) while the
// attempt's ranks start; once every rank of the attempt entered init_process_group
// (RanksConnected: they all connected to gculaunch's store, so their imports are done) the
// standbys keep nice +10 under gculaunch's own policy.  Before the go every thread of a
// standby is set back to gculaunch's priority; a thread that cannot be means a cold start,
// never a rank at low priority.  Where gculaunch cannot raise it again, standbys run at the
// ranks' priority.
//
// Take() hands a standby to the next attempt only when it is faithful and can take its go:
// the same program, argv and CPUs, an environment that differs only in the per-attempt
// variables (warm_standby.h), no terminal or inherited stdin, its preload done, alive, not
// stopped and not traced (/proc/<pid>/status).  The checks and the priority change run on the
// pool's OffLoop thread, never on the event loop, and the attempt does not wait for them: the
// rank starts when they are done, warm or cold.  A standby that cannot serve is dismissed (its
// group killed) with one line naming it and why, and the rank starts cold.
//
// Lifetime: owned by the launch, outlives every WorkerGroup it hands standbys to; DismissAll()
// or Drain() before the end of the run.  Thread safety: io_context thread only.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
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
#include "launcher/sys/group_tracker.h"
#include "launcher/sys/guardian.h"
#include "launcher/sys/off_loop.h"
#include "launcher/sys/spawner.h"
#include "launcher/sys/status_proc.h"
#include "launcher/sys/thread_priority.h"
#include "launcher/sys/unique_fd.h"

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

/// A standby handed to an attempt: its checks passed and its priority is the ranks'; it
/// waits for the go on its stdin (sys::GoChannel over `go`) and is the rank once it confirms.
struct AdoptedStandby {
  pid_t pid = 0;
  sys::UniqueFd go;   ///< gculaunch's end of its stdin socket
  sys::UniqueFd out;  ///< read end of its stdout pipe
  sys::UniqueFd err;  ///< read end of its stderr pipe
};

/// What the checks before a standby's go found (they run off the event loop).
struct StandbyCheck {
  std::string failure;  ///< the hook's ".failed" line (a failed preload); empty: none
  bool ready = false;   ///< its ready file exists: the preload is done
  std::string why;      ///< why it cannot take the go (stopped, traced, priority); empty: it can
};

/// How long a standby has, from the go, to read it and confirm it (why this number:
/// standby_pool.cc, kGoBound).
std::chrono::milliseconds GoConfirmBound();

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
/// Why a standby in `status` cannot take its go ("its standby is stopped (state T)", "... is
/// traced by pid 42"); empty: it can.
std::string WhyCannotGo(const sys::TaskStatus& status);
/// The priority a standby waits at: nice +10 over `base`, and SCHED_IDLE until `lifted` (the
/// attempt's ranks are past their start).
sys::Priority WaitingPriority(const sys::Priority& base, bool lifted);

class StandbyPool {
 public:
  /// How much lower a standby's priority is while it waits (nice +10), where gculaunch can
  /// raise it again for every thread before the go (CAP_SYS_NICE or RLIMIT_NICE).
  static constexpr int kStandbyNice = 10;
  using TakeDone = std::function<void(std::optional<AdoptedStandby>)>;

  StandbyPool(boost::asio::io_context& io, sys::Spawner& spawner, sys::ChildWatcher& watcher,
              sys::Guardian* guardian, StandbySettings settings);
  ~StandbyPool();
  StandbyPool(const StandbyPool&) = delete;
  StandbyPool& operator=(const StandbyPool&) = delete;

  /// Starts a standby for every launch that has none; a launch that cannot be warm (a
  /// terminal, gculaunch's stdin) gets none.  `restart_count`: the attempt whose ranks run
  /// now (their start-up decides the standbys' priority); -1: no rank runs (a node waiting
  /// for its job).  A spawn that fails is logged through `note` and that rank starts cold.
  void Prepare(const std::vector<RankLaunch>& launches, int restart_count = -1);
  /// Takes the standby of `launch`'s local rank for it.  0: there is none (start the rank
  /// cold now; `done` never runs).  Otherwise an id for Cancel(); the checks run off the
  /// event loop and `done` runs later, on the io_context: with the standby, whose group `into`
  /// holds from then on with `on_exit` as its exit handler; or with nullopt, after a line
  /// saying why it could not serve (start the rank cold).
  std::uint64_t Take(const RankLaunch& launch, sys::GroupTracker& into,
                     sys::GroupTracker::ExitHandler on_exit, TakeDone done);
  /// Gives up take `id` (its attempt stops or ends): its standby is dismissed, `done` never
  /// runs.  Unknown ids are ignored.
  void Cancel(std::uint64_t id);
  /// Every rank of attempt `restart_count` connected to gculaunch's store (`connected` is
  /// the store's count of them): once that reaches the attempt's WORLD_SIZE, the standbys
  /// leave SCHED_IDLE (their nice +10 stays).
  void RanksConnected(int restart_count, std::int64_t connected);
  /// One line for a standby that could not serve: "local rank 1 starts cold: <why>; its
  /// standby (pid 42) was dismissed", or, when the attempt stops and the rank does not start
  /// at all (`cold_start` false), "local rank 1 does not start (the attempt is stopping): ...".
  void NoteDismissed(int local_rank, pid_t pid, const std::string& why, bool cold_start) const;
  /// Kills every waiting standby's group (no restart left, or the run ends).  Standbys being
  /// taken belong to their attempt, which cancels them or gets them.
  void DismissAll();
  /// At the end of the run: dismisses every standby and runs the io_context until their
  /// groups are empty and released, at most `bound`.  True when none is left.
  bool Drain(std::chrono::milliseconds bound);
  /// Standbys started and not yet taken or dismissed (alive or not).
  size_t size() const { return standbys_.size(); }
  /// The live standbys, with their memory (PSS: the pages they share with the ranks, the
  /// interpreter's and torch's libraries, count once between them) and whether they are
  /// ready, as the pool's last look off the loop saw them (each call asks for a new look).
  std::vector<StandbyStatus> Status() const;
  /// Groups of dismissed standbys that still have members.
  size_t lingering() const { return groups_.abandoned(); }
  /// Where the one-line notes go (a warning each): a failed preload, a cold start and why.
  void set_note(std::function<void(const std::string&)> note) { note_ = std::move(note); }

 private:
  struct Standby;
  struct Taking;
  struct Sample {
    bool ready = false;
    std::optional<std::uint64_t> pss_bytes;
  };
  void StartAll(const std::vector<RankLaunch>& launches);
  void Start(const RankLaunch& launch);
  void OnExit(pid_t pid, WorkerExit exit);
  void Resolve(std::uint64_t id, const std::string& why_now, const StandbyCheck& check);
  std::string ExitedWhy(const Standby& s) const;
  void Dismiss(std::unique_ptr<Standby> s);
  void Lift();
  void RefreshSamples() const;
  void ScheduleLingerCheck();
  void Note(const std::string& line) const;

  boost::asio::io_context& io_;
  sys::GroupTracker groups_;
  StandbySettings settings_;
  std::map<int, std::unique_ptr<Standby>> standbys_;  ///< waiting, by local rank
  std::map<std::uint64_t, Taking> taking_;            ///< being checked, by take id
  std::uint64_t take_serial_ = 0;
  mutable std::map<pid_t, Sample> samples_;  ///< the last look at each standby (Status)
  mutable bool sampling_ = false;
  boost::asio::steady_timer linger_timer_;
  bool linger_armed_ = false;
  std::chrono::milliseconds linger_poll_;
  int serial_ = 0;  ///< numbers the ready files
  std::function<void(const std::string&)> note_;
  /// gculaunch's priority when it may raise a standby's back to it (decided once, off the
  /// loop); nullopt: standbys run at the ranks' priority.
  std::optional<sys::Priority> base_;
  bool decided_ = false;  ///< base_ is known
  /// A Prepare() before base_ was known: its launches and attempt.
  std::optional<std::pair<std::vector<RankLaunch>, int>> waiting_;
  int attempt_ = -1;            ///< the attempt whose ranks the standbys stand beside
  std::int64_t world_ = 0;      ///< its WORLD_SIZE
  bool lifted_ = true;          ///< its ranks are past their start (or none runs)
  int connected_attempt_ = -1;  ///< the last attempt whose ranks all connected
  bool no_hook_noted_ = false;
  mutable sys::OffLoop off_;  ///< the /proc reads and priority changes (Status() too)
  LifetimeGuard lifetime_;    ///< last member: expires first
};

}  // namespace gculaunch
