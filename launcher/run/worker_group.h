// WorkerGroup: the ranks of one attempt, from spawn to reaping.
//
// For each rank it creates the stdout/stderr pipes and log files, spawns the
// process (its own process group; see sys/child_setup.h) or adopts the rank's
// warm standby (standby_pool.h) when one is ready, registers it with
// the ChildWatcher and the guardian, and starts the RankStreams that carry
// its output.  It signals groups, notices when an exited rank's group has no
// member left, and lists survivors for the stuck report.  When a rank exits it
// reads the rank's error file once, by the rules for files a rank can replace
// (sys::ReadRankFile; docs/security.md), keeps the text in the rank's record
// and copies it into the log directory.  It decides nothing: the Supervisor
// tells it what to do.
//
// A rank's leader is not reaped until its group is known empty: the watcher
// reports the exit and leaves the zombie, which keeps the group's number from
// going to another process, so signalling the group can never reach a
// stranger.  The group is checked 20 ms after the rank exits (one /proc scan
// for every rank that exited meanwhile; in a teardown the Supervisor's drain
// check does it), then every `group_poll` while it still has members; once
// empty, the zombie is released (reaped), the guardian is told, and the group
// is never signalled again.  A scan that fails leaves the group "not empty".
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

  WorkerGroup(WorkerGroupDeps deps, int restart_count, ExitCallback on_exit,
              std::function<void()> on_output_closed);
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  /// Starts the ranks in order.  Stops at the first rank that cannot be
  /// started and returns its error (ranks already started keep running;
  /// `failed_local_rank` names the one that failed).
  Status Start(const std::vector<RankLaunch>& launches, int* failed_local_rank = nullptr);

  /// Sends `sig` to every group that may still have members.  Returns how
  /// many groups were signalled.
  int SignalAll(int sig);
  /// Every started rank exited (its exit was reported; its zombie may still pin its group).
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
  /// exit summary never blames a rank for what happened after it).
  void NoteStopSignal();
  size_t size() const { return ranks_.size(); }
  int restart_count() const { return restart_count_; }

 private:
  struct Rank;
  Result<std::pair<sys::UniqueFd, sys::UniqueFd>> Begin(Rank& r, const RankLaunch& launch,
                                                        int devnull);
  void OnExited(Rank& rank, WorkerExit exit);
  void MarkGroupEmpty(Rank& rank);
  /// Reads the rank's error file into its record and the log directory's copy (a FIFO, a
  /// link, a file over 1 MiB or of another user: one warning instead).
  void CopyErrorFile(Rank& rank);
  void ScheduleGroupCheck(std::chrono::milliseconds after);

  WorkerGroupDeps deps_;
  int restart_count_;
  ExitCallback on_exit_;
  std::function<void()> on_output_closed_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  int open_streams_ = 0;
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
