#include "launcher/ops/status_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "launcher/run/exit_summary.h"

namespace gculaunch {

namespace {

// Milliseconds are all a person or a script needs; more digits only make the JSON noisy.
double Round3(double v) { return std::round(v * 1000.0) / 1000.0; }

nlohmann::json RankJson(const StatusInput& in, const RankStatus& r) {
  nlohmann::json j = {{"rank", r.rank}, {"local_rank", r.local_rank}, {"pid", r.pid}};
  auto proc = in.procs.find(r.pid);
  // Not reaped yet but gone from /proc (or unreadable): "exiting", with no /proc numbers, so
  // that a stale sample is never shown as a live rank's.
  const bool alive = r.running() && proc != in.procs.end() && proc->second.alive;
  if (r.exit) {
    j["state"] = "exited";
    // The one shape of a rank's exit (exit_summary.h): exactly one of exit_code and signal.
    j.update(RankExitJson(r.exit));
  } else {
    j["state"] = alive ? "running" : "exiting";
  }
  j["uptime_s"] = Round3(std::max(0.0, (r.exit ? r.exit_time : in.now) - r.start_time));
  if (alive) {
    const sys::ProcSample& p = proc->second;
    j["proc_state"] = std::string(1, p.state);
    j["cpu_s"] = Round3(p.cpu_s);
    // Over the rank's whole life, not the last second: one sample needs no earlier one.
    j["cpu_percent"] = p.uptime_s > 0 ? Round3(100.0 * p.cpu_s / p.uptime_s) : 0.0;
    j["rss_bytes"] = p.rss_bytes;
  } else {
    j["proc_state"] = nullptr;
    j["cpu_s"] = nullptr;
    j["cpu_percent"] = nullptr;
    j["rss_bytes"] = nullptr;
  }
  auto age = in.progress_age_s.find(r.rank);
  j["last_progress_s"] = r.running() && age != in.progress_age_s.end()
                             ? nlohmann::json(Round3(age->second))
                             : nlohmann::json();
  return j;
}

nlohmann::json NodeJson(const StatusInput& in, const NodeStatus& n) {
  nlohmann::json j = {{"node", n.node},
                      {"host", n.host},
                      {"addr", n.addr},
                      {"state", n.present ? "present" : "lost"}};
  j["last_heartbeat_s"] = n.last_heartbeat > 0
                              ? nlohmann::json(Round3(std::max(0.0, in.now - n.last_heartbeat)))
                              : nlohmann::json();
  if (!n.present) j["lost_reason"] = n.lost_reason;  // only a lost node has one
  return j;
}

// The text view reads the JSON view (StatusJson), so both always show the same values; "-"
// for what is unknown, as ps and top show it.
std::string Cell(const nlohmann::json& v, int decimals = 1) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    char text[32];
    std::snprintf(text, sizeof text, "%.*f", decimals, v.get<double>());
    return text;
  }
  return v.dump();
}

// Columns padded to their widest cell.
std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string Megabytes(const nlohmann::json& bytes) {
  if (!bytes.is_number()) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", bytes.get<double>() / (1024.0 * 1024.0));
  return text;
}

}  // namespace

nlohmann::ordered_json StatusJson(const StatusInput& in) {
  const JobSnapshot& s = *in.job;
  nlohmann::ordered_json j;
  j["schema"] = kStatusSchema;  // first, so that a reader can refuse a format it does not know
  j["run_id"] = s.run_id;
  j["node_rank"] = s.node_rank;
  j["nnodes"] = s.nnodes;
  j["host"] = s.host;
  j["pid"] = s.launcher_pid;
  j["uptime_s"] = Round3(std::max(0.0, in.now - s.launch_time));
  j["layout"] = s.layout;
  if (!in.store_traffic.empty()) j["store_traffic"] = in.store_traffic;
  j["epoch"] = s.epoch;
  j["restarts_used"] = s.restarts;
  j["max_restarts"] = s.max_restarts;
  // Once the job stopped: why (base/outcome.h), its class and the code gculaunch exits with.
  j["outcome"] = s.outcome ? nlohmann::ordered_json(std::string(OutcomeName(*s.outcome)))
                           : nlohmann::ordered_json();
  j["exit_class"] =
      s.outcome ? nlohmann::ordered_json(std::string(ExitClassName(RowOf(*s.outcome).exit_class)))
                : nlohmann::ordered_json();
  j["exit_code"] = s.exit_code ? nlohmann::ordered_json(*s.exit_code) : nlohmann::ordered_json();
  // --restart-backoff: the wait under way before the next restart; null when none.
  const bool waiting = s.restart_backoff_s > 0;
  j["restart_backoff_s"] =
      waiting ? nlohmann::ordered_json(Round3(s.restart_backoff_s)) : nlohmann::ordered_json();
  j["next_restart_in_s"] =
      waiting ? nlohmann::ordered_json(Round3(std::max(0.0, s.next_restart_time - in.now)))
              : nlohmann::ordered_json();
  // The health gate's verdict (docs/runtime.md, "Health checks"): null while healthy.
  j["unhealthy"] =
      s.unhealthy.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(s.unhealthy);
  j["unhealthy_cards"] = s.unhealthy_cards;
  // Restarts that waited for device memory (docs/runtime.md, "Device memory before a restart").
  j["device_memory_waits"] = s.device_memory_waits;
  j["device_memory_held"] = s.device_memory_held;
  // The same answer /readyz gives (readiness.h).
  j["ready"] =
      in.readiness ? nlohmann::ordered_json(in.readiness->ready) : nlohmann::ordered_json();
  j["ready_reason"] =
      in.readiness ? nlohmann::ordered_json(in.readiness->reason) : nlohmann::ordered_json();
  j["ranks"] = nlohmann::ordered_json::array();
  for (const RankStatus& r : s.ranks) j["ranks"].push_back(nlohmann::ordered_json(RankJson(in, r)));
  j["standbys"] = nlohmann::ordered_json::array();
  for (const StandbyStatus& sb : in.standbys) {
    nlohmann::ordered_json one;
    one["local_rank"] = sb.local_rank;
    one["pid"] = sb.pid;
    one["state"] = sb.ready ? "ready" : "importing";
    one["pss_bytes"] = sb.pss_bytes ? nlohmann::ordered_json(*sb.pss_bytes) : nullptr;
    j["standbys"].push_back(std::move(one));
  }
  j["nodes"] = nlohmann::ordered_json::array();
  for (const auto& [node, n] : s.nodes)
    j["nodes"].push_back(nlohmann::ordered_json(NodeJson(in, n)));
  return j;
}

std::string StatusText(const nlohmann::json& st) {
  std::string out = "run " + Cell(st.value("run_id", nlohmann::json())) + ", node " +
                    Cell(st.value("node_rank", nlohmann::json())) + " of " +
                    Cell(st.value("nnodes", nlohmann::json())) + " (" +
                    Cell(st.value("host", nlohmann::json())) + "), gculaunch pid " +
                    Cell(st.value("pid", nlohmann::json())) + ", up " +
                    Cell(st.value("uptime_s", nlohmann::json())) + " s\n";
  out += "epoch " + Cell(st.value("epoch", nlohmann::json())) + ", restarts used " +
         Cell(st.value("restarts_used", nlohmann::json())) + " of " +
         Cell(st.value("max_restarts", nlohmann::json()));
  if (const auto next = st.value("next_restart_in_s", nlohmann::json()); next.is_number()) {
    out += "; next restart in " + Cell(next) + " s (backing off " +
           Cell(st.value("restart_backoff_s", nlohmann::json())) + " s: --restart-backoff)";
  }
  out += "\n";
  if (const auto bad = st.value("unhealthy", nlohmann::json()); bad.is_string()) {
    out += "UNHEALTHY (this node steps aside, exit code 5): " + bad.get<std::string>() + "\n";
  }
  if (auto layout = st.value("layout", std::string()); !layout.empty()) out += layout + "\n";
  if (auto via = st.value("store_traffic", std::string()); !via.empty()) {
    out += "store traffic: " + via + "\n";
  }
  if (const auto ready = st.value("ready", nlohmann::json()); ready.is_boolean()) {
    out += std::string(ready.get<bool>() ? "ready: " : "not ready: ") +
           Cell(st.value("ready_reason", nlohmann::json())) + "\n";
  }
  std::vector<std::vector<std::string>> ranks = {
      {"RANK", "LOCAL", "PID", "STATE", "CPU%", "CPU_S", "RSS_MB", "UPTIME_S", "LAST_OUTPUT_S"}};
  // value(), not []: the text view also reads the answer of another gculaunch version, which
  // may lack a field.
  for (const auto& r : st.value("ranks", nlohmann::json::array())) {
    std::string state = Cell(r.value("state", nlohmann::json()));
    if (state == "exited") {
      state += r.value("signal", nlohmann::json()).is_null()
                   ? " " + Cell(r.value("exit_code", nlohmann::json()))
                   : " " + Cell(r.value("signal", nlohmann::json()));
    }
    ranks.push_back({Cell(r.value("rank", nlohmann::json())),
                     Cell(r.value("local_rank", nlohmann::json())),
                     Cell(r.value("pid", nlohmann::json())), state,
                     Cell(r.value("cpu_percent", nlohmann::json())),
                     Cell(r.value("cpu_s", nlohmann::json()), 2),
                     Megabytes(r.value("rss_bytes", nlohmann::json())),
                     Cell(r.value("uptime_s", nlohmann::json())),
                     Cell(r.value("last_progress_s", nlohmann::json()))});
  }
  out += Table(ranks);
  const auto standbys = st.value("standbys", nlohmann::json::array());
  if (!standbys.empty()) {
    std::vector<std::vector<std::string>> rows = {{"STANDBY", "PID", "STATE", "PSS_MB"}};
    for (const auto& sb : standbys) {
      rows.push_back({Cell(sb.value("local_rank", nlohmann::json())),
                      Cell(sb.value("pid", nlohmann::json())),
                      Cell(sb.value("state", nlohmann::json())),
                      Megabytes(sb.value("pss_bytes", nlohmann::json()))});
    }
    out += "standbys (--warm-ranks):\n" + Table(rows);
  }
  const auto nodes = st.value("nodes", nlohmann::json::array());
  if (!nodes.empty()) {
    std::vector<std::vector<std::string>> rows = {
        {"NODE", "ADDR", "HOST", "STATE", "LAST_HEARTBEAT_S"}};
    for (const auto& n : nodes) {
      rows.push_back(
          {Cell(n.value("node", nlohmann::json())), Cell(n.value("addr", nlohmann::json())),
           Cell(n.value("host", nlohmann::json())), Cell(n.value("state", nlohmann::json())),
           Cell(n.value("last_heartbeat_s", nlohmann::json()))});
    }
    out += "nodes:\n" + Table(rows);
  }
  return out;
}

}  // namespace gculaunch
