#include "launcher/ops/metrics.h"

#include <cmath>
#include <cstdio>
#include <string_view>
#include <utility>
#include <vector>

namespace gculaunch {

namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

// The exposition format's spellings of the special values; whole numbers without a fraction
// or an exponent, as people read them (a byte count of 1e+09 is hard to compare).
std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char text[40];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(text, sizeof text, "%.0f", v);
  } else {  // nine digits: microseconds of a duration of hours survive
    std::snprintf(text, sizeof text, "%.9g", v);
  }
  return text;
}

// Appends families in order; each family's HELP and TYPE come once, before its samples.
class Writer {
 public:
  void Family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }
  void Sample(std::string_view name, const Labels& labels, double value) {
    out_ += name;
    if (!labels.empty()) {
      out_ += '{';
      for (std::size_t i = 0; i < labels.size(); ++i) {
        if (i > 0) out_ += ',';
        out_ += labels[i].first + "=\"" + EscapeLabelValue(labels[i].second) + '"';
      }
      out_ += '}';
    }
    out_ += ' ';
    out_ += Number(value);
    out_ += '\n';
  }
  void One(std::string_view name, std::string_view type, std::string_view help, double value) {
    Family(name, type, help);
    Sample(name, {}, value);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// Only _sum and _count, no quantiles: a scraper computes rates and means from them, and
// quantiles over a whole run would hide the recent attempts.
void Summary(Writer& w, const std::string& name, std::string_view help, const DurationStats& d) {
  w.Family(name, "summary", help);
  w.Sample(name + "_sum", {}, d.sum_s);
  w.Sample(name + "_count", {}, d.count);
}

void JobFamilies(Writer& w, const MetricsInput& in) {
  const JobSnapshot& j = *in.job;
  // The identity as labels of a constant 1, the usual "info" metric: joined onto the other
  // families by a query, instead of repeating the labels on each.
  w.Family("gculaunch_job_info", "gauge", "Identity of this gculaunch (always 1).");
  w.Sample("gculaunch_job_info",
           {{"run_id", j.run_id},
            {"node_rank", std::to_string(j.node_rank)},
            {"nnodes", std::to_string(j.nnodes)},
            {"host", j.host}},
           1);
  w.One("gculaunch_ranks_running", "gauge",
        "Ranks of the current epoch on this node not yet reaped.", j.RanksRunning());
  w.Family("gculaunch_standbys", "gauge",
           "Warm-rank standbys on this node (--warm-ranks), by state: importing the preload "
           "modules, or ready.");
  int ready = 0;
  std::uint64_t pss = 0;
  for (const StandbyStatus& s : in.standbys) {
    ready += s.ready ? 1 : 0;
    pss += s.pss_bytes.value_or(0);
  }
  // Both states always, 0 included: a series that vanishes reads as "no data", not as none.
  w.Sample("gculaunch_standbys", {{"state", "importing"}},
           static_cast<double>(in.standbys.size()) - ready);
  w.Sample("gculaunch_standbys", {{"state", "ready"}}, ready);
  w.One("gculaunch_standby_pss_bytes", "gauge",
        "Memory of the standbys (proportional set size: shared pages counted once among the "
        "processes that share them).",
        static_cast<double>(pss));
  w.Family("gculaunch_rank_exits_total", "counter",
           "Rank exits on this node by exit code (128+N for a death by signal N).");
  for (const auto& [code, count] : j.exits_by_code) {
    Labels labels{{"exit_code", std::to_string(code)}};
    // 128+N is how a shell reports a death by signal N; the name spares the reader the sum.
    if (code > 128 && code < 128 + 65) labels.emplace_back("signal", SignalName(code - 128));
    w.Sample("gculaunch_rank_exits_total", labels, count);
  }
  // Once the job stopped (between the stop and the end of the process): why, by the outcome
  // table's names (base/outcome.h); the value is the code gculaunch exits with.
  if (j.outcome) {
    w.Family("gculaunch_outcome", "gauge",
             "Why the job stopped (outcome and exit class); the value is gculaunch's exit code.");
    w.Sample("gculaunch_outcome",
             {{"outcome", std::string(OutcomeName(*j.outcome))},
              {"exit_class", std::string(ExitClassName(RowOf(*j.outcome).exit_class))}},
             j.exit_code.value_or(0));
  }
  w.One("gculaunch_restarts_total", "counter", "Restarts of the job's ranks used so far.",
        j.restarts);
  w.One("gculaunch_max_restarts", "gauge", "The restart budget (--max-restarts).", j.max_restarts);
  w.One("gculaunch_restart_backoff_seconds", "gauge",
        "The back-off under way before the next restart (--restart-backoff); 0 when none.",
        j.restart_backoff_s);
  w.Family("gculaunch_node_unhealthy", "gauge",
           "1 when the health gate found this node's cards unhealthy (the node steps aside, "
           "exit code 5), by card; 0 while healthy.");
  if (j.unhealthy_cards.empty()) w.Sample("gculaunch_node_unhealthy", {}, 0);
  for (const std::string& card : j.unhealthy_cards) {
    w.Sample("gculaunch_node_unhealthy", {{"card", card}}, 1);
  }
  w.One("gculaunch_device_memory_waits_total", "counter",
        "Restarts that waited for the last attempt's device memory to be freed "
        "(--device-memory-wait).",
        j.device_memory_waits);
  w.One("gculaunch_device_memory_held_total", "counter",
        "Of those, the waits whose bound passed with memory still held (the restart went on).",
        j.device_memory_held);
  w.One("gculaunch_epoch", "gauge",
        "The current epoch (TORCHELASTIC_RESTART_COUNT of the running ranks); -1 before the "
        "first.",
        j.epoch);
  Summary(w, "gculaunch_rendezvous_duration_seconds",
          "Time to settle each epoch's membership (multi-node: from the start or the stop to "
          "the plan).",
          j.rendezvous);
  Summary(w, "gculaunch_restart_duration_seconds",
          "Time from an attempt's stop (a failure) to its restart.", j.restart_durations);
  w.Family("gculaunch_rank_last_progress_age_seconds", "gauge",
           "Seconds since each running rank last wrote output or touched its heartbeat file.");
  for (const auto& [rank, age] : in.progress_age_s) {
    w.Sample("gculaunch_rank_last_progress_age_seconds", {{"rank", std::to_string(rank)}}, age);
  }
  w.Family("gculaunch_rank_uptime_seconds", "gauge", "Seconds since each running rank started.");
  for (const RankStatus& r : j.ranks) {
    if (!r.running()) continue;
    w.Sample("gculaunch_rank_uptime_seconds",
             {{"rank", std::to_string(r.rank)}, {"local_rank", std::to_string(r.local_rank)}},
             std::max(0.0, in.now - r.start_time));
  }
}

void NodeFamilies(Writer& w, const MetricsInput& in) {
  const JobSnapshot& j = *in.job;
  if (j.nodes.empty()) return;  // only node 0 of a multi-node job knows the nodes
  w.One("gculaunch_nodes_present", "gauge", "Nodes of the job that are members now (node 0).",
        j.NodesPresent());
  w.One("gculaunch_nodes_lost", "gauge", "Nodes of the job that are lost now and awaited (node 0).",
        j.NodesLost());
  w.One("gculaunch_node_losses_total", "counter", "Node losses so far (node 0).", j.node_losses);
  w.Family("gculaunch_node_last_heartbeat_age_seconds", "gauge",
           "Seconds since each node's last heartbeat (node 0; node 0 itself is not listed).");
  for (const auto& [node, n] : j.nodes) {
    if (n.last_heartbeat <= 0 || !n.present) continue;
    w.Sample("gculaunch_node_last_heartbeat_age_seconds", {{"node", std::to_string(node)}},
             std::max(0.0, in.now - n.last_heartbeat));
  }
}

void StoreFamilies(Writer& w, const MetricsInput& in) {
  if (in.store == nullptr) return;
  const rendezvous::StoreMetrics& s = *in.store;
  w.One("gculaunch_store_connections", "gauge", "Open connections to the store this node hosts.",
        static_cast<double>(in.store_connections_open));
  w.One("gculaunch_store_connections_total", "counter", "Connections the store accepted.",
        static_cast<double>(s.connections_total()));
  w.Family("gculaunch_store_operations_total", "counter", "Store requests by operation.");
  for (const auto& [op, stats] : s.operations()) {
    w.Sample("gculaunch_store_operations_total", {{"op", std::string(rendezvous::OpName(op))}},
             static_cast<double>(stats.count));
  }
  const std::string h = "gculaunch_store_operation_duration_seconds";
  w.Family(h, "histogram",
           "Store request latency by operation, from decoding to the reply (a parked WAIT: to "
           "its release).");
  for (const auto& [op, stats] : s.operations()) {
    const std::string name(rendezvous::OpName(op));
    for (std::size_t i = 0; i < rendezvous::StoreMetrics::kBuckets.size(); ++i) {
      w.Sample(h + "_bucket", {{"op", name}, {"le", Number(rendezvous::StoreMetrics::kBuckets[i])}},
               static_cast<double>(stats.buckets[i]));
    }
    // The +Inf bucket is the count: the format requires it, and every request falls in it.
    w.Sample(h + "_bucket", {{"op", name}, {"le", "+Inf"}}, static_cast<double>(stats.count));
    w.Sample(h + "_sum", {{"op", name}}, stats.sum_s);
    w.Sample(h + "_count", {{"op", name}}, static_cast<double>(stats.count));
  }
}

}  // namespace

// The three escapes the text format defines; a run id or host name with a quote must not end
// the label early and corrupt every sample after it.
std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string RenderMetrics(const MetricsInput& in) {
  Writer w;
  JobFamilies(w, in);
  NodeFamilies(w, in);
  StoreFamilies(w, in);
  if (in.process_cpu_s) {
    w.One("gculaunch_process_cpu_seconds_total", "counter",
          "CPU time gculaunch itself used (user and system).", *in.process_cpu_s);
  }
  if (in.process_rss_bytes) {
    w.One("gculaunch_process_resident_memory_bytes", "gauge", "gculaunch's resident memory.",
          static_cast<double>(*in.process_rss_bytes));
  }
  w.One("gculaunch_log_bytes_dropped_total", "counter",
        "Bytes of rank output that could not be written to their log files (a full disk); the "
        "console stream is not affected.",
        static_cast<double>(in.log_bytes_dropped));
  return w.Take();
}

}  // namespace gculaunch
