// RankLaunch and RankRecord: what is handed down to start one rank of one attempt, and what
// is known about it afterwards; AttemptPlanner: who makes each attempt's RankLaunches.  Plain data
// shared by the planner, the worker group, the supervisor and the exit summary, kept apart so that
// the pure ones (planner, summary) need no event loop.
//
// Thread safety: plain values.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "launcher/sys/held_dir.h"
#include "launcher/sys/worker_exit.h"

namespace gculaunch {

/// Everything needed to start one rank of one attempt.
struct RankLaunch {
  int local_rank = 0;
  int rank = 0;  ///< global rank
  /// Before each console line (ConsolePrefix); empty: "[rank<rank>]: ".
  std::string console_prefix;
  std::string program;            ///< resolved executable path
  std::vector<std::string> argv;  ///< argv[0] included
  std::vector<std::string> env;   ///< complete environment, "KEY=VALUE"
  bool inherit_stdin = false;     ///< --stdin rank0: keep gculaunch's stdin
  bool take_terminal = false;     ///< and make the rank's group the terminal's foreground
  bool stdout_to_console = true;
  bool stderr_to_console = true;
  /// The run's log directory, held by descriptor; none: no log files.
  std::optional<sys::HeldDir> log_dir;
  std::string
      stdout_log;  ///< log file, relative to log_dir ("attempt_0/1/stdout.log"); empty: none
  std::string stderr_log;
  /// Relative to log_dir: the attempt's filtered_stdout.log / filtered_stderr.log
  /// (--duplicate-*-filters), the same for every rank of the attempt and created even when
  /// no rank feeds it; empty: none.
  std::string filtered_stdout_log;
  std::string filtered_stderr_log;
  /// This rank's stdout / stderr lines that contain one of these go to the filtered file;
  /// empty: none of its lines do.
  std::vector<std::string> stdout_filters;
  std::vector<std::string> stderr_filters;
  std::string error_file;  ///< the rank's TORCHELASTIC_ERROR_FILE (private); empty: none
  /// Relative to log_dir: where the rank's error file is copied when it exits; empty: none.
  std::string error_file_copy;
  std::vector<int> cpus;       ///< --cpu-affinity: CPUs to pin the rank to; empty: none
  std::string stack_file;      ///< --stack-dumps: where its hook appends dumps; empty: no hook
  int stack_signal = 0;        ///< --stack-dumps: the signal that asks for a dump
  std::string heartbeat_file;  ///< --hang-timeout: GCULAUNCH_HEARTBEAT_FILE; empty: none
};

/// What happened to one rank in one attempt.
struct RankRecord {
  int restart_count = 0;
  int local_rank = 0;
  int rank = 0;
  pid_t pid = -1;                  ///< -1: never started
  bool warm = false;               ///< --warm-ranks: a standby served it (standby_pool.h)
  std::string error_file;          ///< where the rank was told to write it (error_text)
  std::string error_file_shown;    ///< its copy in the log directory; empty: none (show error_file)
  std::optional<WorkerExit> exit;  ///< empty: not reaped (running or stuck)
  double start_time = 0;           ///< unix seconds
  double exit_time = 0;
  bool exited_while_running = false;  ///< exited before gculaunch began a teardown
  /// When gculaunch sent this attempt's first teardown signal (SIGTERM after a failure, the
  /// signal it received, a job stop), unix nanoseconds; 0: never signalled.
  std::int64_t stop_signal_ns = 0;
  std::vector<std::string> stderr_tail;
  /// The error file as read once, when the rank exited (WorkerGroup::CopyErrorFile): the exit
  /// summary, --summary-json and the parent's error file use this text and never open the
  /// file again.  Null: the rank wrote none, or it was refused (a link, a FIFO, too large...).
  /// Shared: records are copied often, and the text may be 1 MiB.
  std::shared_ptr<const std::string> error_text;
  /// Its modification time (of the descriptor it was read through), unix ns; 0: unknown.
  std::int64_t error_file_mtime_ns = 0;
};

/// Supplies the ranks of each attempt (paths, environment, routing).  It may
/// create the attempt's directories; an error ends the job (exit 127).
class AttemptPlanner {
 public:
  virtual ~AttemptPlanner() = default;
  virtual Result<std::vector<RankLaunch>> PlanAttempt(int restart_count) = 0;
};

/// What is known about one rank's progress, as ages in seconds at the time of the check (for
/// the hang watch, launcher/ops/hang_check.h).
struct RankProgress {
  int local_rank = 0;
  int rank = 0;
  bool running = true;                    ///< not reaped yet
  std::optional<double> output_age_s;     ///< since its last output; none: never printed
  std::optional<double> heartbeat_age_s;  ///< since its heartbeat file's mtime; none: no file
  double since_start_s = 0;               ///< since it was started
};

/// One rank to ask for a stack dump (launcher/ops/stack_dumper.h).
struct StackTarget {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = -1;           ///< -1: not running
  std::string file;         ///< the hook's file; empty: started without the hook
  int signal = 0;           ///< the stack-dump signal
  std::string not_running;  ///< with pid -1: why ("exited with code 1", "not started")
};

}  // namespace gculaunch
