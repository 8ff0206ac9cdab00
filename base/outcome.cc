#include "base/outcome.h"

#include <array>

#include "base/exit_codes.h"

namespace gculaunch {

namespace {

using C = ExitClass;
using O = Outcome;

// The order of the enumerators: RowOf indexes by them (checked in outcome_test.cc).
constexpr std::array<OutcomeRow, 16> kRows{{
    {O::kSuccess, "success", exit_code::kSuccess, C::kSuccess, "every rank exited 0"},
    {O::kUsage, "usage", exit_code::kUsage, C::kFatal,
     "usage or configuration error (a bad flag, variable, file or device)"},
    {O::kJobError, "job_error", -1, C::kFatal,
     "the job cannot run: this node was refused (another job's run id, a node rank taken, a "
     "secret mismatch) or the nodes disagree"},
    {O::kSpawnFailed, "spawn_failed", -1, C::kFatal,
     "a rank's program was not found (127) or cannot be run (126)"},
    {O::kInternal, "internal", exit_code::kInternal, C::kFatal,
     "internal error in gculaunch (a bug: please report it)"},
    {O::kSameFailure, "same_failure", -1, C::kFatal,
     "the same failure again and again (--max-same-failures): restarting does not help"},
    {O::kRendezvousFailed, "rendezvous_failed", exit_code::kRendezvousFailed, C::kRetry,
     "rendezvous failed at --rdzv-timeout"},
    {O::kNodeLost, "node_lost", exit_code::kNodeLost, C::kRetry,
     "a node of the job was lost and the job could not re-form"},
    {O::kNodeLeft, "node_left", exit_code::kNodeLost, C::kRetry,
     "a node left the job and the job could not re-form"},
    {O::kHang, "hang", exit_code::kHang, C::kRetry,
     "the job hung (--hang-timeout) and was stopped"},
    {O::kRankFailed, "rank_failed", -1, C::kRetry, "a rank failed and no restart was left"},
    {O::kStuck, "stuck", exit_code::kStuckProcesses, C::kReschedule,
     "ranks could not be killed: this node is unhealthy"},
    {O::kUnhealthy, "unhealthy", exit_code::kStuckProcesses, C::kReschedule,
     "this node failed its health check"},
    {O::kNoResources, "no_resources", exit_code::kNoResources, C::kReschedule,
     "a rank could not be started for lack of resources (open files, processes, memory)"},
    {O::kSignal, "signal", -1, C::kPreempted, "gculaunch was stopped by a signal"},
    {O::kNodeJoined, "node_joined", -1, C::kRetry, "a node joined the job (elastic re-form)",
     false},
}};

}  // namespace

std::span<const OutcomeRow> OutcomeTable() { return kRows; }

const OutcomeRow& RowOf(Outcome outcome) { return kRows.at(static_cast<size_t>(outcome)); }

std::string_view OutcomeName(Outcome outcome) { return RowOf(outcome).name; }

std::optional<Outcome> OutcomeNamed(std::string_view name) {
  for (const OutcomeRow& row : kRows) {
    if (row.name == name) return row.outcome;
  }
  return std::nullopt;
}

std::string_view ExitClassName(ExitClass c) {
  switch (c) {
    case C::kSuccess:
      return "success";
    case C::kFatal:
      return "fatal";
    case C::kRetry:
      return "retry";
    case C::kReschedule:
      return "reschedule";
    case C::kPreempted:
      return "preempted";
  }
  return "fatal";
}

int ExitClassCode(ExitClass c) {
  switch (c) {
    case C::kSuccess:
      return exit_class_code::kSuccess;
    case C::kFatal:
      return exit_class_code::kFatal;
    case C::kRetry:
      return exit_class_code::kRetry;
    case C::kReschedule:
      return exit_class_code::kReschedule;
    case C::kPreempted:
      return exit_class_code::kPreempted;
  }
  return exit_class_code::kFatal;
}

std::string_view ExitSchemeName(ExitScheme s) {
  return s == ExitScheme::kClasses ? "classes" : "rank";
}

std::optional<ExitScheme> ExitSchemeNamed(std::string_view name) {
  if (name == "rank") return ExitScheme::kRank;
  if (name == "classes") return ExitScheme::kClasses;
  return std::nullopt;
}

int SchemeExitCode(ExitScheme scheme, Outcome outcome, int rank_code) {
  if (scheme == ExitScheme::kRank) return rank_code;
  return ExitClassCode(RowOf(outcome).exit_class);
}

}  // namespace gculaunch
