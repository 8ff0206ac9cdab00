// FailureSignature: an attempt's failure in one line, so that two failures can be compared
// (the failure streak, failure_streak.h).
//
//   AttemptSignature(records, 3, files) -> "exit code 1: KeyError: 'lr'"
//
// The failing rank is the one the exit summary would blame (FindRootCause, exit_summary.h:
// the earliest error file, else the first reaped), so the streak and the summary agree.  The
// signature is that rank's exit ("exit code 1", "signal 11 (SIGSEGV)") and the last line of
// its error file's message (torch's @record writes "KeyError: 'lr'"), else of its stderr,
// else nothing more.  The rank's number, its pid and the time are left out: they change from
// attempt to attempt while the failure stays the same.  The line is cut to kMaxSignatureLine
// bytes (it travels between nodes, in the reaped report, job_protocol.h).
//
// Both functions are pure: the failed ranks' error files come from their records, as the
// worker group read them once when each rank exited (RankRecord::error_text; no file is opened
// here, so a rank cannot change what the streak sees after the summary saw it).
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "launcher/run/rank_record.h"
#include "launcher/sys/worker_exit.h"

namespace gculaunch {

/// The longest last line a signature keeps, in bytes.
inline constexpr std::size_t kMaxSignatureLine = 240;

/// The failed ranks' error files of one attempt, by local rank: their text and modification
/// time (unix nanoseconds).
struct AttemptErrorFiles {
  std::map<int, std::string> text;
  std::map<int, std::int64_t> mtime_ns;
};

/// The last line of `text` that is not blank, without surrounding white space, cut to
/// kMaxSignatureLine bytes (never inside a UTF-8 character); "" when there is none.
std::string LastLine(std::string_view text);

/// "exit code 1: KeyError: 'lr'"; without a line just "exit code 1".
std::string SignatureOf(const WorkerExit& exit, std::string_view line);

/// The signature of attempt `restart_count` from its ranks' records (other attempts' records
/// are ignored); "" when no rank of it failed by itself (stopped by gculaunch, or by the job).
std::string AttemptSignature(const std::vector<RankRecord>& records, int restart_count,
                             const AttemptErrorFiles& files);

/// The error files of the ranks of attempt `restart_count` that failed, as their records hold
/// them (a missing or refused one is left out: the stderr tail stands in).
AttemptErrorFiles ReadAttemptErrorFiles(const std::vector<RankRecord>& records, int restart_count);

}  // namespace gculaunch
