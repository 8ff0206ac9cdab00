// DeviceHealth: whether this node's cards may run the next attempt, as pure functions of what
// the checks saw (docs/device-profiles.md, "Health checks").
//
// Three kinds of check make one HealthReport, one row each:
//   built-in    the profile's device files are there and its driver is loaded (DeviceProbe)
//   vendor tool the management tool the profile's `health:` names (nvidia-smi, ...), run with
//               the profile's query; each card's fields judged by the profile's rules
//   --health-check CMD, any executable: exit 0 is healthy, its reason the first output line
// A value the tool cannot give ("[N/A]", "[Not Supported]") is not checked, never unhealthy; a
// tool that is not installed is "not checked"; a tool that says a card is lost (Xid 79: "GPU is
// lost") or hangs past its timeout makes the cards it names (hung: all of them) unhealthy.  A
// query the tool refuses as a whole (one field unknown to this driver: nvidia-smi exits 2) is
// asked again one field at a time (HealthFieldQueries), so one unknown field costs that field
// only.
//
// No I/O here: the executor (launcher/sys/health_runner.h) runs the commands and hands their
// outcomes in; `gculaunch check` and the launch's gate use the same functions.
// Thread safety: pure functions over values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "launcher/frontend/device_profile.h"

namespace gculaunch {

/// What one check concluded.
enum class HealthVerdict { kHealthy, kUnhealthy, kNotChecked };

/// One check's row: "nvidia-smi: card 1: uncorrectable ECC errors (... = 2)".
struct HealthRow {
  std::string check;  ///< "device files", "driver", "nvidia-smi", "--health-check"
  HealthVerdict verdict = HealthVerdict::kHealthy;
  std::vector<std::string> cards;  ///< the cards it is about (unhealthy: the bad ones)
  std::string reason;              ///< one line; for kHealthy what was checked
};

/// A card still holding device memory: its index and the MiB the tool reported.
struct HeldMemory {
  std::string card;
  int64_t mib = 0;
};

/// How the wait for device memory before a restart went (profile `health.memory`,
/// --device-memory-wait): it ran when an attempt had torn down on this node.
struct MemoryWaitReport {
  bool fired = false;             ///< the first look found memory held: gculaunch waited
  double waited_s = 0;            ///< from the first query to the last answer
  int64_t below_mib = 0;          ///< the profile's threshold
  std::vector<HeldMemory> first;  ///< what the first look found held
  std::vector<HeldMemory> held;   ///< still held when the wait ended (the bound passed)
  std::string failed;             ///< the query failed (one line): memory not checked
};

struct HealthReport {
  std::vector<HealthRow> rows;
  std::optional<MemoryWaitReport> memory;  ///< the wait for device memory, when it ran
  bool healthy() const;
  /// The unhealthy rows in one line: "card 1: nvidia-smi: uncorrectable ECC errors (...)";
  /// empty when healthy.
  std::string Describe() const;
  /// Every card an unhealthy row names, in order, once each.
  std::vector<std::string> UnhealthyCards() const;
};

/// How one command ended, as the executor saw it (sys CommandOutcome, without its types).
struct HealthRun {
  enum class Kind { kExited, kSignaled, kTimedOut, kMissing, kFailed };
  Kind kind = Kind::kExited;
  int code = 0;  ///< kExited: the code; kSignaled: the signal
  std::string out;
  std::string err;       ///< stderr, or kFailed: why it could not be started
  double timeout_s = 0;  ///< kTimedOut: the limit
};

/// One query of the vendor tool: the argv after the tool's path and the fields asked for
/// (the index field first).
struct HealthQuery {
  std::vector<std::string> args;
  std::vector<std::string> fields;
};

/// The first query: every field at once.  REQUIRES: profile.health.
HealthQuery HealthFullQuery(const HealthToolSpec& tool);
/// The fall-back: one query per field (with the index field).
std::vector<HealthQuery> HealthFieldQueries(const HealthToolSpec& tool);
/// Whether a full query's outcome should be asked again field by field: the tool ran and
/// refused (a non-zero exit) without saying that a card is lost.
bool HealthNeedsFallback(const HealthToolSpec& tool, const HealthRun& run);

/// The query of the cards' used memory: the index field and `tool.memory->field`.
/// REQUIRES: tool.memory.
HealthQuery HealthMemoryQuery(const HealthToolSpec& tool);
/// The cards of `cards` (empty: every card the tool lists) whose used memory is at or above
/// `tool.memory->below_mib`; a value the tool cannot give ("[N/A]") counts as freed.  An
/// error when the tool failed or printed no row gculaunch can read.  Values may carry the
/// unit ("3000 MiB").
Result<std::vector<HeldMemory>> JudgeHealthMemory(const HealthToolSpec& tool, const HealthRun& run,
                                                  const std::vector<std::string>& cards);
/// "card 1: 3000 MiB, card 3: 512 MiB".
std::string DescribeHeldMemory(const std::vector<HeldMemory>& held);

/// The vendor tool's row from its runs: the full query alone, or the per-field queries
/// (`runs[i]` answers `queries[i]`).  `cards`: the node's card pool: rows of other cards are
/// not judged (empty: every row), and a hung tool names them all.
HealthRow JudgeHealthTool(const HealthToolSpec& tool, const std::vector<HealthQuery>& queries,
                          const std::vector<HealthRun>& runs,
                          const std::vector<std::string>& cards);
/// The row of a tool that is not installed: not checked.
HealthRow HealthToolMissing(const HealthToolSpec& tool, const std::string& path_var);

/// The built-in rows: the device files seen when gculaunch started (`device_ids`, the ids of
/// the profile's pattern) are all still there, and the driver is loaded.  `cards`: the
/// node's card pool (a missing driver names them all).
std::vector<HealthRow> JudgeBuiltinHealth(const DeviceProfile& profile, const DeviceProbe& probe,
                                          const std::vector<std::string>& device_ids,
                                          const std::vector<std::string>& cards);

/// --health-check's row: exit 0 is healthy; the reason is the first line of stdout, else of
/// stderr.  `cards`: the node's (named when it fails).
HealthRow JudgeHealthCommand(const std::string& command, const HealthRun& run,
                             const std::vector<std::string>& cards);

}  // namespace gculaunch
