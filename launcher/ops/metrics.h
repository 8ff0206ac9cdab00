// Metrics: the Prometheus text exposition (format 0.0.4) of one node's job, as /metrics serves
// it (metrics_http.h).  docs/operations.md lists every family and what it means.
//
// RenderMetrics is pure: it formats what the JobStatus (status_model.h), the store's counters
// (rendezvous/store_metrics.h) and the caller's samples say; the caller reads the clock and
// /proc.  Every family has its HELP and TYPE lines before its samples, names carry the
// "gculaunch_" prefix, counters end in "_total", durations are in seconds ("_seconds").
//
// Thread safety: pure.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "launcher/ops/status_model.h"
#include "launcher/run/standby_pool.h"
#include "rendezvous/store_metrics.h"

namespace gculaunch {

struct MetricsInput {
  const JobSnapshot* job = nullptr;  ///< required
  double now = 0;                    ///< unix seconds, for ages
  /// This node hosts the store: its counters and how many connections are open now.
  const rendezvous::StoreMetrics* store = nullptr;
  std::size_t store_connections_open = 0;
  /// Seconds since each running rank (by global rank) last showed progress (output or a
  /// heartbeat file); ranks missing here are not reported.
  std::map<int, double> progress_age_s;
  /// gculaunch's own CPU seconds and resident bytes, when known.
  std::optional<double> process_cpu_s;
  std::optional<std::uint64_t> process_rss_bytes;
  /// Rank output that could not be written to its log file (a full disk), bytes.
  std::uint64_t log_bytes_dropped = 0;
  /// --warm-ranks: the live standbys.
  std::vector<StandbyStatus> standbys;
};

/// The text of one scrape.
std::string RenderMetrics(const MetricsInput& in);

/// A label value escaped for the text format (backslash, double quote, newline).
std::string EscapeLabelValue(const std::string& value);

}  // namespace gculaunch
