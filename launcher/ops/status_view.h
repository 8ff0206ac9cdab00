// StatusView: what `gculaunch status` shows of one running launch, as JSON and as text.
//
// StatusJson is pure: the job's picture (status_model.h), the time, each rank's process sample
// (launcher/sys/status_proc.h) and how long ago each rank showed progress.  The running
// gculaunch builds it when asked over its control socket; the client prints it, as JSON
// (--format json) or through StatusText.  docs/operations.md describes every field.
//
// Thread safety: pure.
#pragma once

#include <sys/types.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "launcher/ops/readiness.h"
#include "launcher/ops/status_model.h"
#include "launcher/run/standby_pool.h"
#include "launcher/sys/status_proc.h"

namespace gculaunch {

/// The "schema" field of the status JSON.
inline constexpr int kStatusSchema = 1;

struct StatusInput {
  const JobSnapshot* job = nullptr;        ///< required
  double now = 0;                          ///< unix seconds
  std::map<pid_t, sys::ProcSample> procs;  ///< by pid; a rank missing here shows no CPU/RSS
  std::map<int, double> progress_age_s;    ///< by global rank
  std::vector<StandbyStatus> standbys;     ///< --warm-ranks: the live standbys
  std::optional<Readiness> readiness;      ///< what /readyz answers now (readiness.h)
  std::string store_traffic;               ///< where the ranks' store connections go
};

nlohmann::ordered_json StatusJson(const StatusInput& in);

/// The human form of a StatusJson document (a few lines and two tables).
std::string StatusText(const nlohmann::json& status);

}  // namespace gculaunch
