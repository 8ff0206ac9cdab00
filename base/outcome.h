// The outcomes of a launch: why gculaunch exits, in one table.  Every place that names an
// outcome reads it here: the exit summary and --summary-json ("outcome", "exit_class"), the
// stop event of events.jsonl, `gculaunch status`, /metrics, the termination message, and the
// stop markers the nodes of a job exchange (launcher/cluster/job_protocol.h: a marker's
// "kind" is its outcome's name).  README.md's "Exit codes" table is checked against it
// (tests/base/outcome_test.cc).
//
//   outcome            rank scheme (today's codes)          class (--exit-codes classes)
//   success            0                                    success    0
//   usage              2                                    fatal      83
//   job_error          the job's code (2: refused)          fatal      83
//   spawn_failed       126 / 127, as the shell says         fatal      83
//   internal           70                                   fatal      83
//   same_failure       the failed rank's code               fatal      83
//   rendezvous_failed  3                                    retry      80
//   node_lost          4                                    retry      80
//   node_left          4 (the node that left: its own)      retry      80
//   hang               6                                    retry      80
//   rank_failed        the failed rank's code (or 128+S)    retry      80
//   stuck              5                                    reschedule 82
//   unhealthy          5                                    reschedule 82
//   no_resources       7                                    reschedule 82
//   signal             128+S (SIGTERM 143, SIGINT 130)      preempted  81
//   node_joined        never final (an elastic re-form)     -
//
// The class codes 80-83 never change (README.md gives the reasons they were chosen).  The
// names never change either: they are on the wire between nodes, and a node of an older
// gculaunch decodes only the names it knows.  Adding an outcome is adding a row here, and to
// README.md's table (docs/architecture.md, "Where to add").
//
// Thread safety: constant data and pure functions.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace gculaunch {

enum class Outcome {
  kSuccess,
  kUsage,
  kJobError,
  kSpawnFailed,
  kInternal,
  kSameFailure,
  kRendezvousFailed,
  kNodeLost,
  kNodeLeft,
  kHang,
  kRankFailed,
  kStuck,
  kUnhealthy,
  kNoResources,
  kSignal,
  kNodeJoined,
};

/// What the platform should do next, named by the exit status under --exit-codes classes.
enum class ExitClass { kSuccess, kFatal, kRetry, kReschedule, kPreempted };

/// --exit-codes: `rank` passes the failing rank's code through (the default, as torchrun);
/// `classes` exits with the class's code only.
enum class ExitScheme { kRank, kClasses };

namespace exit_class_code {
inline constexpr int kSuccess = 0;
// Ordered by strength: where several nodes' codes are folded into their maximum (srun reports
// the highest of its tasks), the strongest verdict wins: a bug (fatal) over a broken node
// (reschedule) over a preemption over a plain retry (what the other nodes of such a job see).
inline constexpr int kRetry = 80;
inline constexpr int kPreempted = 81;
inline constexpr int kReschedule = 82;
inline constexpr int kFatal = 83;
}  // namespace exit_class_code

struct OutcomeRow {
  Outcome outcome;
  std::string_view name;  ///< JSON, events, status, metrics label, stop-marker kind
  /// The code under the rank scheme; -1 when it is given by what happened (a rank's code,
  /// 128+S, 126/127, the job's code).
  int rank_code;
  ExitClass exit_class;
  std::string_view wording;  ///< what the summary and the termination message say
  bool final = true;         ///< false: never how a launch ends (node_joined)
};

/// Every row, in the order of the file comment.
std::span<const OutcomeRow> OutcomeTable();
/// The row of `outcome` (every enumerator has one: a missing row fails the build's tests).
const OutcomeRow& RowOf(Outcome outcome);
std::string_view OutcomeName(Outcome outcome);
/// The outcome named `name`; none for a name this build does not know.
std::optional<Outcome> OutcomeNamed(std::string_view name);

std::string_view ExitClassName(ExitClass c);  ///< "success", "fatal", ...
int ExitClassCode(ExitClass c);
std::string_view ExitSchemeName(ExitScheme s);  ///< "rank" or "classes"
std::optional<ExitScheme> ExitSchemeNamed(std::string_view name);

/// The status gculaunch exits with: `rank_code` (the code under the rank scheme, as the
/// launch computed it) or the outcome's class code.
int SchemeExitCode(ExitScheme scheme, Outcome outcome, int rank_code);

}  // namespace gculaunch
