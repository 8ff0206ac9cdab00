// WorkerGroup: the ranks of one attempt, from spawn to reaping.
//
// For each rank it opens the log files and gives it a process: a new one (pipes for stdout
// and stderr, the spawn, in its own process group; see sys/child_setup.h), or, with
// --warm-ranks, the rank's standby (standby_pool.h).  It starts the RankStreams that carry the
// output, signals groups, notices when an exited rank's group has no member left, and lists
// survivors for the stuck report.  When a rank exits it reads the rank's error file once, by
// the rules for files a rank can replace (sys::ReadRankFile; docs/security.md), keeps the text
// in the rank's record and copies it into the log directory.  It decides nothing: the
// Supervisor tells it what to do.
//
// A standby becomes a rank in three steps, none of which the attempt waits for: the pool's
// checks (off the event loop), the go (sys::GoChannel: the attempt's environment on the
// standby's stdin), and the standby's confirmation within GoConfirmBound().  From the go on the
// standby is this attempt's: its group is signalled with the others and its output is the
// rank's.  A standby that does not confirm (stopped after the checks, deaf, dead) is killed
// and the rank starts cold, with one line; while the attempt stops, a rank whose standby had
// not confirmed yet does not start at all.  on_started tells when each rank's process is
// final, on_settled when no rank waits for one any more.
//
// A rank's leader is not reaped until its group is known empty (sys::GroupTracker, shared
// with StandbyPool): the watcher reports the exit and leaves the zombie, which keeps the
// group's number from going to another process, so signalling the group can never reach a
// stranger.  The group is checked 20 ms after the rank exits (one /proc scan for every rank
// that exited meanwhile; in a teardown the Supervisor's drain check does it), then every
// `group_poll` while it still has members; once empty, the zombie is released (reaped), the
// guardian is told, and the group is never signalled again.  A scan that fails leaves the
// group "not empty".
//
// Lifetime: destroy only after CheckGroupsEmpty() (the Supervisor guarantees
// it, or gculaunch is exiting after a stuck report).  Callbacks run on the
// io_context thread and must not destroy the WorkerGroup.
// Thread safety: io_context thread only.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/lifetime.h"
#include "launcher/run/line_splitter.h"
#include "launcher/run/output_writer.h"
#include "launcher/run/rank_output.h"
#include "launcher/run/rank_record.h"
#include "launcher/run/standby_pool.h"
#include "launcher/sys/child_watcher.h"
#include "launcher/sys/go_channel.h"
#include "launcher/sys/group_tracker.h"
#include "launcher/sys/guardian.h"
#include "launcher/sys/process_group.h"
#include "launcher/sys/spawner.h"
#include "launcher/sys/worker_exit.h"

namespace gculaunch {

/// The collaborators a WorkerGroup uses; all outlive it.
struct WorkerGroupDeps {
  boost::asio::io_context& io;
  sys::Spawner& spawner;
  sys::ChildWatcher& watcher;
  OutputWriter& writer;
  OutputFlow& flow;
  sys::Guardian* guardian = nullptr;  ///< null: no guardian (tests)
  TargetPtr console_out;              ///< gculaunch's stdout
  TargetPtr console_err;              ///< gculaunch's stderr
  std::chrono::milliseconds idle_flush{250};
  std::chrono::milliseconds progress_interval{30000};  ///< --progress-interval
  /// How often the group of an exited rank is looked at again while it has members.
  std::chrono::milliseconds group_poll{500};
  /// --warm-ranks: the standbys a rank is taken from when one can serve it; null: none.
  StandbyPool* standbys = nullptr;
};

class WorkerGroup {
 public:
  using ExitCallback = std::function<void(int local_rank, WorkerExit exit)>;
  /// What else the Supervisor hears (each may be left unset).
  struct Hooks {
    /// A rank's process is final (spawned, or its standby confirmed the go).
    std::function<void(const RankRecord& record)> on_started;
    /// No rank waits for its process any more (at the end of Start() when none waited).
    std::function<void()> on_settled;
    /// A rank whose standby could not serve could not be started cold either.
    std::function<void(int local_rank, const Error& error)> on_start_failed;
  };

  WorkerGroup(WorkerGroupDeps deps, int restart_count, ExitCallback on_exit,
              std::function<void()> on_output_closed, Hooks hooks = {});
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  /// Starts the ranks in order: spawns each, or begins taking its standby (the rank then
  /// starts later, warm or cold: on_started).  Stops at the first rank that cannot be started
  /// and returns its error (ranks already started keep running; `failed_local_rank` names the
  /// one that failed).
  Status Start(const std::vector<RankLaunch>& launches, int* failed_local_rank = nullptr);

  /// Sends `sig` to every group that may still have members.  Returns how
  /// many groups were signalled.
  int SignalAll(int sig);
  /// Every started rank exited (its exit was reported; its zombie may still pin its group),
  /// and no rank waits for its process.
  bool AllExited() const;
  /// Re-checks the groups of exited ranks (/proc; zombies do not count) and releases the
  /// leaders of those found empty.  True when every started rank exited and every group
  /// is empty.  False also when /proc could not be read (scan_error() says why).
  bool CheckGroupsEmpty();
  /// Why the last look at the groups failed; empty when it did not.
  const std::string& scan_error() const { return scan_error_; }
  /// Every output stream reached end-of-file (or was closed).
  bool OutputClosed() const;
  /// Stops reading every stream now.
  void CloseOutput();
  /// Processes still alive in this attempt's groups (running ranks included).
  std::vector<sys::ProcInfo> Survivors() const;
  /// The records so far, with the current stderr tails.
  std::vector<RankRecord> Records() const;
  /// The ranks to ask for a stack dump (launcher/ops/stack_dumper.h): running ranks with their pid,
  /// exited or never-started ones with the reason.
  std::vector<StackTarget> StackTargets() const;
  /// How long ago each started rank showed progress (output, heartbeat file), for
  /// --hang-timeout (launcher/ops/hang_check.h).
  std::vector<RankProgress> Progress() const;
  /// Marks a rank's exit as having happened while the attempt was running.
  void MarkExitedWhileRunning(int local_rank);
  /// Notes, once per attempt, that gculaunch is about to send the teardown signal now (the
  /// exit summary never blames a rank for what happened after it).  A rank whose standby is
  /// still being checked does not start.
  void NoteStopSignal();
  size_t size() const { return ranks_.size(); }
  /// Ranks that wait for their process (a standby being checked, or told to go).
  int waiting() const { return waiting_; }
  /// The longest a standby of this attempt took from its go to its confirmation, in
  /// milliseconds (0: none confirmed).
  double slowest_go_ms() const { return slowest_go_ms_; }
  int restart_count() const { return restart_count_; }

 private:
  struct Rank;
  class FilteredFiles;
  Status OpenOutput(Rank& r, const RankLaunch& launch, FilteredFiles& filtered);
  bool TakeStandby(Rank& r);
  void OnStandby(Rank& r, std::optional<AdoptedStandby> standby);
  void OnGoAnswer(Rank& r, const Status& answer);
  void Confirmed(Rank& r);
  void GiveUpStandby(Rank& r, const std::string& why);
  Status SpawnCold(Rank& r);
  void StartColdNow(Rank& r);
  void StartStreams(Rank& r, sys::UniqueFd out, sys::UniqueFd err);
  void Started(Rank& r);
  void Settle(Rank& r);
  void OnExited(Rank& rank, pid_t pid, WorkerExit exit);
  /// Reads the rank's error file into its record and the log directory's copy (a FIFO, a
  /// link, a file over 1 MiB or of another user: one warning instead).
  void CopyErrorFile(Rank& rank);
  void ScheduleGroupCheck(std::chrono::milliseconds after);

  WorkerGroupDeps deps_;
  int restart_count_;
  ExitCallback on_exit_;
  std::function<void()> on_output_closed_;
  Hooks hooks_;
  sys::GroupTracker groups_;
  sys::UniqueFd devnull_;  ///< every cold rank's stdin (unless it inherits gculaunch's)
  std::vector<std::unique_ptr<Rank>> ranks_;
  int open_streams_ = 0;
  int waiting_ = 0;  ///< ranks waiting for their process
  double slowest_go_ms_ = 0;
  std::string scan_error_;
  boost::asio::steady_timer group_timer_;
  bool group_check_pending_ = false;
  bool stopping_ = false;  ///< NoteStopSignal: the drain check looks at the groups from now on
  static constexpr std::chrono::milliseconds kExitCheckDelay{20};
  LifetimeGuard lifetime_;  ///< last member; the destructor expires it first
};

/// Unix time in seconds, for records.
double UnixNow();
/// Unix time in nanoseconds (CLOCK_REALTIME, the clock of file modification times).
std::int64_t UnixNowNs();

}  // namespace gculaunch
