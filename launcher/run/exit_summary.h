// ExitSummary: what gculaunch reports when the job ends, as a pure function
// of what happened.
//
//   BuildExitSummary(SummaryInput) -> {root cause, hints, text lines,
//                                      --summary-json document,
//                                      the parent's error-file document}
//
// Root cause: among the last attempt's ranks that failed (non-zero exit or a
// signal) either while the attempt was running or with an error file written
// before gculaunch signalled the attempt, the earliest one: by the modification
// time of its TORCHELASTIC_ERROR_FILE in nanoseconds (torch 1.13's own
// "timestamp" has whole seconds, and ranks failing together tie), else by the
// moment gculaunch reaped it; on a tie the one reaped first.  A rank whose
// error file appeared after gculaunch's teardown signal (it failed because it
// was stopped, or because its peers were) is never the root cause.  Both
// error-file forms are read (docs/worker-environment.md section 4):
//   nested  {"message": {"message": "...", "extraInfo": {"py_callstack": "...",
//                                                        "timestamp": "<secs>"}}}
//   flat    {"message": "...", "timestamp": <secs>}
// Without an error file the summary shows the last stderr lines gculaunch
// kept (a Python traceback shows without @record).
//
// Hints name a likely fix: a PyTorch without libuv, a taken store port, stuck
// processes, and for a rank that died of ModuleNotFoundError the interpreter
// that ran it and how it was chosen (python3 on PATH, --python, PYTHON_EXEC).
//
// When gculaunch runs under another launcher (its own TORCHELASTIC_ERROR_FILE
// is set), `parent_error` is the root cause in the nested form with
// "errorCode" (the exit code) added, as torchrun writes it.
//
// The error files are read once, by the worker group when each rank exits (the text is in
// the rank's record, rank_record.h); the outputs are written by the caller
// (launcher/app/launch.cc).  This module does no I/O.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/outcome.h"
#include "launcher/run/rank_record.h"
#include "launcher/run/restart_policy.h"
#include "launcher/sys/process_group.h"

namespace gculaunch {

/// A parsed TORCHELASTIC_ERROR_FILE.
struct ErrorFileReport {
  std::string message;       ///< e.g. "ValueError: boom"
  std::string py_callstack;  ///< traceback text; may be empty
  double timestamp = 0;      ///< unix seconds; 0 when the file has none
  bool nested = false;       ///< written by @record (nested form)
  nlohmann::json document;   ///< the whole file
};

/// Parses either form.  Errors name what is wrong ("not JSON", "no message").
Result<ErrorFileReport> ParseErrorFile(std::string_view text);

struct SummaryInput {
  std::string host;
  int node_rank = 0;
  int exit_code = 0;
  PolicyState final_state;
  int restarts = 0;
  int max_restarts = 0;
  std::vector<RankRecord> records;  ///< every attempt
  /// Contents of the error files that were read (RankRecord::error_text), by (restart_count,
  /// local_rank).
  std::map<std::pair<int, int>, std::string> error_files;
  /// Their modification times (st_mtim of the descriptor they were read through), unix
  /// nanoseconds; a file missing here is ordered by its rank's reap time.
  std::map<std::pair<int, int>, std::int64_t> error_file_mtime_ns;
  std::vector<sys::ProcInfo> stuck;
  std::optional<Error> start_error;
  int start_error_local_rank = -1;
  std::string master_port;         ///< as exported to the ranks
  bool master_port_given = false;  ///< --master-port (not chosen at launch)
  bool rank0_hosts_store = false;  ///< --no-agent-store / torch 1.13 standalone mode
  std::string child_watcher;       ///< "pidfd" or "sigchld"
  /// The ranks' Python interpreter and how it was chosen (LaunchSpec::python_origin); empty
  /// with --no-python.  Named in the hint for a ModuleNotFoundError.
  std::string python;
  std::string python_origin;
  double start_time = 0;
  double end_time = 0;
  /// Multi-node: why the job ended, as every node tells it (job_protocol.h).  Empty on a
  /// single node.  `job_outcome` replaces the local outcome (rank_failed, node_lost,
  /// node_left, job_error, rendezvous_failed, success, ...: base/outcome.h); `job_cause` is
  /// a line naming the node (and rank) where it happened; `job_json` goes to --summary-json
  /// as "job".
  std::optional<Outcome> job_outcome;
  std::string job_cause;
  nlohmann::json job_json;
  /// Rank output that could not be written to its log file (a full disk), bytes.
  std::uint64_t log_bytes_dropped = 0;
  /// --exit-codes: `exit_code` above is the rank scheme's code; the summary says which code
  /// gculaunch exits with under this scheme (ExitSummary::exit_code).
  ExitScheme exit_scheme = ExitScheme::kRank;
};

struct RootCause {
  int restart_count = 0;
  int local_rank = 0;
  int rank = 0;
  int node_rank = 0;
  int pid = -1;
  WorkerExit exit;
  double timestamp = 0;
  std::int64_t order_ns = 0;  ///< what the root cause was chosen by (mtime or reap time)
  std::string message;
  std::string traceback;   ///< from the error file, else the stderr tail
  std::string error_file;  ///< path, when the rank wrote one
  bool from_error_file = false;
  std::vector<std::string> stderr_tail;
};

struct ExitSummary {
  Outcome outcome = Outcome::kInternal;
  /// The status gculaunch exits with under SummaryInput::exit_scheme.
  int exit_code = 0;
  std::optional<RootCause> root_cause;
  std::vector<std::string> hints;
  /// Lines for gculaunch's stderr (empty on success).
  std::vector<std::string> text;
  nlohmann::json json;
  /// For gculaunch's own TORCHELASTIC_ERROR_FILE; empty on success.
  std::optional<nlohmann::json> parent_error;
  /// For the pod's termination log (--termination-log): at most kTerminationMessageMax
  /// bytes, the most important first (TerminationMessage).
  std::string termination_message;
};

/// Kubernetes keeps 4096 bytes of a container's termination message (and 12 KiB for all the
/// containers of a pod together).
inline constexpr size_t kTerminationMessageMax = 4096;

/// The termination message: `head` lines in order (the first ones are the most important),
/// then as many of the last `tail` lines as fit, under `title`; at most `limit` bytes (a
/// head line that does not fit is cut).
std::string FitTerminationMessage(const std::vector<std::string>& head, const std::string& title,
                                  const std::vector<std::string>& tail,
                                  size_t limit = kTerminationMessageMax);

/// The termination message of a launch that ended before its ranks ran (a usage error, a
/// program not found): the outcome, the code gculaunch exits with and the error's line.
std::string EarlyTerminationMessage(Outcome outcome, int exit_code, const std::string& line);

/// One JSON shape for a rank's exit, everywhere (--summary-json, events.jsonl, `gculaunch
/// status`): {"exit_code": N or null, "signal": "SIGKILL" or null, "shell_code": N or null};
/// exactly one of exit_code and signal is set once the rank exited, none before.
nlohmann::json RankExitJson(const std::optional<WorkerExit>& exit);

/// The text PyTorch prints when a build without libuv is asked for it.
inline constexpr std::string_view kNoLibuvMessage =
    "use_libuv was requested but PyTorch was build without libuv support";

ExitSummary BuildExitSummary(const SummaryInput& input);

/// The root cause among the ranks of attempt `input.restarts` (the file comment's rule);
/// none when no rank of it failed by itself.  BuildExitSummary's choice, and the failing rank
/// of an attempt's failure signature (failure_signature.h).
std::optional<RootCause> FindRootCause(const SummaryInput& input);

/// Why the launch ended (base/outcome.h): success, rank_failed, same_failure (the failure
/// streak ended the loop: PolicyState::loop_stop), signal, spawn_failed, no_resources,
/// hang, stuck or internal; in a multi-node job the job's outcome (SummaryInput::job_outcome)
/// unless stuck or signalled.
Outcome OutcomeOf(const SummaryInput& input);

}  // namespace gculaunch
