#include "launcher/run/exit_summary.h"

#include <cmath>
#include <cstdlib>

#include "base/exit_codes.h"

namespace gculaunch {

using nlohmann::json;

namespace {

// A timestamp given as a number or as a string of digits.
double TimestampOf(const json& value) {
  if (value.is_number()) return value.get<double>();
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end != text.c_str()) return v;
  }
  return 0;
}

std::string Join(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) {
    out += line;
    out += '\n';
  }
  return out;
}

bool TailContains(const std::vector<std::string>& tail, std::string_view needle) {
  for (const std::string& line : tail) {
    if (line.find(needle) != std::string::npos) return true;
  }
  return false;
}

std::string LastNonEmpty(const std::vector<std::string>& tail) {
  for (auto it = tail.rbegin(); it != tail.rend(); ++it) {
    if (it->find_first_not_of(" \t") != std::string::npos) return *it;
  }
  return "";
}

json ExitJson(const std::optional<WorkerExit>& exit) {
  json j;
  if (!exit) {
    j["exit_code"] = nullptr;
    j["signal"] = nullptr;
  } else if (exit->kind == WorkerExit::Kind::kSignaled) {
    j["exit_code"] = exit->ShellCode();
    j["signal"] = SignalName(exit->value);
  } else {
    j["exit_code"] = exit->value;
    j["signal"] = nullptr;
  }
  return j;
}

}  // namespace

Result<ErrorFileReport> ParseErrorFile(std::string_view text) {
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Error{"not valid JSON", ""};
  if (!doc.is_object() || !doc.contains("message")) {
    return Error{"no \"message\" key", ""};
  }
  ErrorFileReport report;
  const json& message = doc["message"];
  if (message.is_object()) {
    report.nested = true;
    if (message.contains("message") && message["message"].is_string()) {
      report.message = message["message"].get<std::string>();
    }
    if (message.contains("extraInfo") && message["extraInfo"].is_object()) {
      const json& extra = message["extraInfo"];
      if (extra.contains("py_callstack") && extra["py_callstack"].is_string()) {
        report.py_callstack = extra["py_callstack"].get<std::string>();
      }
      if (extra.contains("timestamp")) report.timestamp = TimestampOf(extra["timestamp"]);
    }
  } else if (message.is_string()) {
    report.message = message.get<std::string>();
    if (doc.contains("timestamp")) report.timestamp = TimestampOf(doc["timestamp"]);
  } else {
    return Error{"\"message\" is neither text nor an object", ""};
  }
  report.document = std::move(doc);
  return report;
}

std::string OutcomeName(const SummaryInput& input) {
  if (input.exit_code == exit_code::kStuckProcesses && !input.stuck.empty()) return "stuck";
  if (!input.job_outcome.empty() && input.final_state.cause != StopCause::kSignal) {
    return input.job_outcome;
  }
  switch (input.final_state.cause) {
    case StopCause::kSuccess: return "success";
    case StopCause::kRankFailed: return "rank_failed";
    case StopCause::kSignal: return "signal";
    case StopCause::kSpawnFailed: return "spawn_failed";
    case StopCause::kJob:
    case StopCause::kNone: break;
  }
  return "internal";
}

ExitSummary BuildExitSummary(const SummaryInput& in) {
  ExitSummary out;
  const int last_attempt = in.restarts;

  // ---- root cause ----
  std::optional<RootCause> best;
  for (const RankRecord& r : in.records) {
    if (r.restart_count != last_attempt || !r.exit || r.exit->success()) continue;
    std::optional<ErrorFileReport> report;
    auto file = in.error_files.find({r.restart_count, r.local_rank});
    if (file != in.error_files.end()) {
      auto parsed = ParseErrorFile(file->second);
      if (parsed.ok()) report = std::move(*parsed);
    }
    if (!r.exited_while_running && !report) continue;  // stopped by gculaunch
    RootCause c;
    c.restart_count = r.restart_count;
    c.local_rank = r.local_rank;
    c.rank = r.rank;
    c.node_rank = in.node_rank;
    c.pid = r.pid;
    c.exit = *r.exit;
    c.stderr_tail = r.stderr_tail;
    if (report) {
      c.from_error_file = true;
      c.error_file = r.error_file;
      c.message = report->message;
      c.traceback = report->py_callstack.empty() ? Join(r.stderr_tail) : report->py_callstack;
      c.timestamp = report->timestamp > 0 ? report->timestamp : r.exit_time;
    } else {
      c.timestamp = r.exit_time;
      if (r.exit->kind == WorkerExit::Kind::kSignaled) {
        c.message = "Signal " + std::to_string(r.exit->value) + " (" +
                    SignalName(r.exit->value) + ") received by PID " + std::to_string(r.pid);
      } else {
        const std::string last = LastNonEmpty(r.stderr_tail);
        c.message = last.empty() ? r.exit->Describe() : last;
      }
      c.traceback = Join(r.stderr_tail);
    }
    if (!best || c.timestamp < best->timestamp) best = std::move(c);
  }
  out.root_cause = best;

  // ---- hints ----
  for (const RankRecord& r : in.records) {
    if (r.restart_count != last_attempt || !r.exit || r.exit->success()) continue;
    if (TailContains(r.stderr_tail, kNoLibuvMessage)) {
      out.hints.push_back(
          "this PyTorch was built without libuv and cannot use gculaunch's store: "
          "run with --no-agent-store (rank 0 then hosts the store)");
      break;
    }
  }
  for (const RankRecord& r : in.records) {
    if (r.restart_count != last_attempt || r.rank != 0 || !r.exit || r.exit->success()) continue;
    if (in.rank0_hosts_store &&
        (TailContains(r.stderr_tail, "Address already in use") ||
         TailContains(r.stderr_tail, "errno: 98"))) {
      out.hints.push_back(
          in.master_port_given
              ? "MASTER_PORT " + in.master_port +
                    " was already in use when rank 0 tried to host the store: pass a free "
                    "--master-port (or leave it out and gculaunch picks one)"
              : "the port gculaunch picked (" + in.master_port +
                    ") was taken by another program before rank 0 bound it: run again, or "
                    "pass a free --master-port");
    }
  }
  if (!in.stuck.empty()) {
    out.hints.push_back(
        "processes in uninterruptible sleep (state D) wait inside the kernel, usually on a "
        "device driver or a network file system: this node needs attention");
  }

  // ---- text for stderr ----
  const std::string outcome = OutcomeName(in);
  if (in.exit_code != 0) {
    auto& t = out.text;
    if (best) {
      t.push_back("rank " + std::to_string(best->rank) + " failed (local rank " +
                  std::to_string(best->local_rank) + ", node " + std::to_string(in.node_rank) +
                  (in.host.empty() ? "" : " " + in.host) + ", pid " + std::to_string(best->pid) +
                  (in.restarts > 0 ? ", restart " + std::to_string(best->restart_count) : "") +
                  "): " + best->exit.Describe());
      if (best->from_error_file) {
        t.push_back("error file " + best->error_file + ": " + best->message);
      }
      std::vector<std::string> lines;
      if (best->from_error_file && !best->traceback.empty()) {
        size_t start = 0;
        const std::string& tb = best->traceback;
        while (start < tb.size()) {
          const size_t nl = tb.find('\n', start);
          lines.push_back(tb.substr(start, nl == std::string::npos ? std::string::npos
                                                                  : nl - start));
          if (nl == std::string::npos) break;
          start = nl + 1;
        }
        t.push_back("traceback from the error file:");
      } else if (!best->stderr_tail.empty()) {
        lines = best->stderr_tail;
        t.push_back("last " + std::to_string(lines.size()) + " line(s) of rank " +
                    std::to_string(best->rank) + "'s stderr:");
      } else {
        t.push_back("rank " + std::to_string(best->rank) + " wrote nothing to stderr");
      }
      for (const std::string& line : lines) t.push_back("  | " + line);
    }
    if (!in.job_cause.empty()) t.push_back(in.job_cause);
    if (in.start_error) {
      t.push_back(in.start_error_local_rank >= 0
                      ? "local rank " + std::to_string(in.start_error_local_rank) +
                            " could not be started: " + in.start_error->what
                      : "the ranks could not be started: " + in.start_error->what);
    }
    if (in.final_state.cause == StopCause::kSignal) {
      t.push_back("stopped by " + SignalName(in.final_state.stop_signal));
    }
    for (const sys::ProcInfo& info : in.stuck) t.push_back("stuck: " + info.Describe());
    for (const std::string& hint : out.hints) t.push_back("hint: " + hint);
    t.push_back("exit code " + std::to_string(in.exit_code) + " (" + outcome + ")");
  }

  // ---- --summary-json ----
  json& j = out.json;
  j["exit_code"] = in.exit_code;
  j["outcome"] = outcome;
  j["signal"] = in.final_state.cause == StopCause::kSignal
                    ? json(SignalName(in.final_state.stop_signal))
                    : json(nullptr);
  j["restarts"] = in.restarts;
  j["max_restarts"] = in.max_restarts;
  j["node_rank"] = in.node_rank;
  j["host"] = in.host;
  j["child_watcher"] = in.child_watcher;
  j["start_time"] = in.start_time;
  j["end_time"] = in.end_time;
  if (best) {
    json rc = ExitJson(best->exit);
    rc["rank"] = best->rank;
    rc["local_rank"] = best->local_rank;
    rc["node_rank"] = best->node_rank;
    rc["pid"] = best->pid;
    rc["restart_count"] = best->restart_count;
    rc["timestamp"] = best->timestamp;
    rc["message"] = best->message;
    rc["traceback"] = best->traceback;
    rc["error_file"] = best->from_error_file ? json(best->error_file) : json(nullptr);
    rc["stderr_tail"] = best->stderr_tail;
    j["root_cause"] = std::move(rc);
  } else {
    j["root_cause"] = nullptr;
  }
  j["ranks"] = json::array();
  for (const RankRecord& r : in.records) {
    json rank = ExitJson(r.exit);
    rank["restart_count"] = r.restart_count;
    rank["rank"] = r.rank;
    rank["local_rank"] = r.local_rank;
    rank["pid"] = r.pid > 0 ? json(r.pid) : json(nullptr);
    rank["state"] = r.pid <= 0 ? "not_started" : !r.exit ? "not_reaped" : "exited";
    rank["exited_while_running"] = r.exited_while_running;
    j["ranks"].push_back(std::move(rank));
  }
  j["stuck"] = json::array();
  for (const sys::ProcInfo& info : in.stuck) {
    j["stuck"].push_back({{"pid", info.pid},
                          {"pgid", info.pgid},
                          {"comm", info.comm},
                          {"state", std::string(1, info.state)},
                          {"wchan", info.wchan}});
  }
  j["start_error"] = in.start_error ? json(in.start_error->Format()) : json(nullptr);
  j["hints"] = out.hints;
  j["job"] = in.job_json.is_null() ? json(nullptr) : in.job_json;

  // ---- the parent launcher's error file ----
  if (in.exit_code != 0) {
    json parent;
    if (best && best->from_error_file) {
      auto file = in.error_files.find({best->restart_count, best->local_rank});
      auto parsed = ParseErrorFile(file->second);
      if (parsed.ok() && parsed->nested) parent = parsed->document;
    }
    if (parent.is_null()) {
      std::string message, traceback;
      double timestamp = in.end_time;
      if (best) {
        message = best->message;
        traceback = best->traceback;
        timestamp = best->timestamp;
      } else if (in.start_error) {
        message = in.start_error->Format();
      } else if (in.final_state.cause == StopCause::kSignal) {
        message = "gculaunch stopped by " + SignalName(in.final_state.stop_signal);
      } else if (!in.job_cause.empty()) {
        message = in.job_cause;
      } else if (!in.stuck.empty()) {
        message = "ranks could not be killed: " + in.stuck.front().Describe();
      } else {
        message = "gculaunch failed with exit code " + std::to_string(in.exit_code);
      }
      parent = {{"message",
                 {{"message", message},
                  {"extraInfo",
                   {{"py_callstack", traceback},
                    {"timestamp", std::to_string(static_cast<long long>(std::floor(timestamp)))}}}}}};
    }
    parent["message"]["errorCode"] = in.exit_code;
    out.parent_error = std::move(parent);
  }
  return out;
}

}  // namespace gculaunch
