#include "launcher/run/exit_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>

#include "base/exit_codes.h"
#include "base/text.h"

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

// Every line followed by a newline ("" for no lines).
std::string TextOf(const std::vector<std::string>& lines) {
  std::string text = Join(lines, "\n");
  if (!lines.empty()) text += '\n';
  return text;
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

// ---- root cause ----

// A rank of the last attempt that failed: what the summary says about it, or nothing when
// gculaunch stopped it and it left no error file.
std::optional<RootCause> CandidateOf(const RankRecord& r, const SummaryInput& in) {
  std::optional<ErrorFileReport> report;
  auto file = in.error_files.find({r.restart_count, r.local_rank});
  if (file != in.error_files.end()) {
    auto parsed = ParseErrorFile(file->second);
    if (parsed.ok()) report = std::move(*parsed);
  }
  if (!r.exited_while_running && !report) return std::nullopt;  // stopped by gculaunch
  const auto mtime = in.error_file_mtime_ns.find({r.restart_count, r.local_rank});
  const bool has_mtime = report && mtime != in.error_file_mtime_ns.end() && mtime->second > 0;
  // Reaped after the teardown signal, with an error file written after it: a consequence.
  if (!r.exited_while_running && has_mtime && r.stop_signal_ns > 0 &&
      mtime->second >= r.stop_signal_ns) {
    return std::nullopt;
  }
  RootCause c;
  c.order_ns = has_mtime ? mtime->second : std::llround(r.exit_time * 1e9);
  c.restart_count = r.restart_count;
  c.local_rank = r.local_rank;
  c.rank = r.rank;
  c.node_rank = in.node_rank;
  c.pid = r.pid;
  c.exit = *r.exit;
  c.stderr_tail = r.stderr_tail;
  if (report) {
    c.from_error_file = true;
    c.error_file = r.error_file_shown.empty() ? r.error_file : r.error_file_shown;
    c.message = report->message;
    c.traceback = report->py_callstack.empty() ? TextOf(r.stderr_tail) : report->py_callstack;
    c.timestamp = report->timestamp > 0 ? report->timestamp : r.exit_time;
  } else {
    c.timestamp = r.exit_time;
    if (r.exit->kind == WorkerExit::Kind::kSignaled) {
      c.message = "Signal " + std::to_string(r.exit->value) + " (" + SignalName(r.exit->value) +
                  ") received by PID " + std::to_string(r.pid);
    } else {
      const std::string last = LastNonEmpty(r.stderr_tail);
      c.message = last.empty() ? r.exit->Describe() : last;
    }
    c.traceback = TextOf(r.stderr_tail);
  }
  return c;
}

// Whether `r` is a rank of the last attempt that did not succeed.
bool FailedInLastAttempt(const RankRecord& r, const SummaryInput& in) {
  return r.restart_count == in.restarts && r.exit && !r.exit->success();
}

// Whether `a` failed before `b`: the error file's mtime (else the reap time), then the reap
// time, then the one that exited while the attempt ran.
bool Earlier(const RootCause& a, double a_reaped, bool a_running, const RootCause& b,
             double b_reaped, bool b_running) {
  if (a.order_ns != b.order_ns) return a.order_ns < b.order_ns;
  if (a_reaped != b_reaped) return a_reaped < b_reaped;
  return a_running && !b_running;
}

}  // namespace

// The earliest candidate (the first one on a complete tie).
std::optional<RootCause> FindRootCause(const SummaryInput& in) {
  std::optional<RootCause> best;
  double best_reaped = 0;
  bool best_running = false;
  for (const RankRecord& r : in.records) {
    if (!FailedInLastAttempt(r, in)) continue;
    std::optional<RootCause> c = CandidateOf(r, in);
    if (!c) continue;
    if (!best ||
        Earlier(*c, r.exit_time, r.exited_while_running, *best, best_reaped, best_running)) {
      best = std::move(c);
      best_reaped = r.exit_time;
      best_running = r.exited_while_running;
    }
  }
  return best;
}

namespace {

// ---- hints ----

// "No module named 'torch'" in a failed rank's stderr tail or error file: the module's name.
std::optional<std::string> MissingModule(const RankRecord& r, const SummaryInput& in) {
  static constexpr std::string_view kNoModule = "No module named '";
  std::vector<std::string> texts = r.stderr_tail;
  auto file = in.error_files.find({r.restart_count, r.local_rank});
  if (file != in.error_files.end()) {
    if (auto parsed = ParseErrorFile(file->second); parsed.ok()) texts.push_back(parsed->message);
  }
  for (const std::string& line : texts) {
    const size_t at = line.find(kNoModule);
    if (at == std::string::npos) continue;
    const size_t start = at + kNoModule.size();
    const size_t end = line.find('\'', start);
    if (end != std::string::npos && end > start) return line.substr(start, end - start);
  }
  return std::nullopt;
}

// Which interpreter ran the ranks, how it was chosen, and how to choose another.
std::string ModuleHint(const SummaryInput& in, int rank, const std::string& module) {
  std::string how;
  std::string fix;
  if (in.python_origin == "PYTHON_EXEC") {
    how = "chosen by PYTHON_EXEC";
    fix = "install it for that interpreter, or point PYTHON_EXEC (or --python) at one that has it";
  } else if (in.python_origin == "python3 on PATH") {
    how = "the python3 found on PATH";
    fix =
        "install it for that interpreter, or pass --python PATH (or set PYTHON_EXEC) to the "
        "interpreter that has it, e.g. your virtual environment's bin/python";
  } else {
    how = "chosen by " + in.python_origin;
    fix = "install it for that interpreter, or give " + in.python_origin +
          " an interpreter that has it";
  }
  return "rank " + std::to_string(rank) + " found no module named '" + module + "': it ran " +
         in.python + " (" + how + "); " + fix;
}

std::vector<std::string> Hints(const SummaryInput& in) {
  std::vector<std::string> hints;
  if (!in.python.empty()) {
    for (const RankRecord& r : in.records) {
      if (!FailedInLastAttempt(r, in)) continue;
      if (auto module = MissingModule(r, in)) {
        hints.push_back(ModuleHint(in, r.rank, *module));
        break;
      }
    }
  }
  for (const RankRecord& r : in.records) {
    if (!FailedInLastAttempt(r, in)) continue;
    if (TailContains(r.stderr_tail, kNoLibuvMessage)) {
      hints.push_back(
          "this PyTorch was built without libuv and cannot use gculaunch's store: "
          "run with --no-agent-store (rank 0 then hosts the store)");
      break;
    }
  }
  for (const RankRecord& r : in.records) {
    if (r.rank != 0 || !FailedInLastAttempt(r, in)) continue;
    if (in.rank0_hosts_store && (TailContains(r.stderr_tail, "Address already in use") ||
                                 TailContains(r.stderr_tail, "errno: 98"))) {
      hints.push_back(
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
    hints.push_back(
        "processes in uninterruptible sleep (state D) wait inside the kernel, usually on a "
        "device driver or a network file system: this node needs attention");
  }
  return hints;
}

// ---- text for stderr ----

// The root cause's lines: which rank failed, then its error file's traceback or its last
// stderr lines.
void AddRootCauseLines(const SummaryInput& in, const RootCause& best, std::vector<std::string>& t) {
  t.push_back("rank " + std::to_string(best.rank) + " failed (local rank " +
              std::to_string(best.local_rank) + ", node " + std::to_string(in.node_rank) +
              (in.host.empty() ? "" : " " + in.host) + ", pid " + std::to_string(best.pid) +
              (in.restarts > 0 ? ", restart " + std::to_string(best.restart_count) : "") +
              "): " + best.exit.Describe());
  if (best.from_error_file) {
    t.push_back("error file " + best.error_file + ": " + best.message);
  }
  std::vector<std::string> lines;
  if (best.from_error_file && !best.traceback.empty()) {
    lines = Split(best.traceback, '\n');
    if (lines.back().empty()) lines.pop_back();  // the traceback's final newline
    t.push_back("traceback from the error file:");
  } else if (!best.stderr_tail.empty()) {
    lines = best.stderr_tail;
    t.push_back("last " + std::to_string(lines.size()) + " line(s) of rank " +
                std::to_string(best.rank) + "'s stderr:");
  } else {
    t.push_back("rank " + std::to_string(best.rank) + " wrote nothing to stderr");
  }
  for (const std::string& line : lines) t.push_back("  | " + line);
}

std::vector<std::string> TextLines(const SummaryInput& in, const std::optional<RootCause>& best,
                                   const std::vector<std::string>& hints, Outcome outcome,
                                   int exit_code) {
  std::vector<std::string> t;
  if (best) AddRootCauseLines(in, *best, t);
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
  if (!in.final_state.loop_stop.empty()) t.push_back(in.final_state.loop_stop);
  if (in.final_state.cause == StopCause::kUnhealthy) {
    t.push_back("this node is unhealthy: " + in.final_state.unhealthy +
                "; it started no further attempt, so that the platform can replace it");
  }
  if (in.final_state.cause == StopCause::kHang) {
    t.push_back(
        "the ranks were stopped because the job hung (--hang-timeout); their stacks "
        "are shown above");
  }
  for (const sys::ProcInfo& info : in.stuck) t.push_back("stuck: " + info.Describe());
  for (const std::string& hint : hints) t.push_back("hint: " + hint);
  t.push_back("exit code " + std::to_string(exit_code) + " (" + std::string(OutcomeName(outcome)) +
              (in.exit_scheme == ExitScheme::kClasses
                   ? ", class " + std::string(ExitClassName(RowOf(outcome).exit_class)) +
                         "; the rank scheme's code is " + std::to_string(in.exit_code)
                   : "") +
              ")");
  return t;
}

// ---- --summary-json ----

json RootCauseJson(const RootCause& best) {
  json rc = RankExitJson(best.exit);
  rc["rank"] = best.rank;
  rc["local_rank"] = best.local_rank;
  rc["node_rank"] = best.node_rank;
  rc["pid"] = best.pid;
  rc["restart_count"] = best.restart_count;
  rc["timestamp"] = best.timestamp;
  rc["message"] = best.message;
  rc["traceback"] = best.traceback;
  rc["error_file"] = best.from_error_file ? json(best.error_file) : json(nullptr);
  rc["stderr_tail"] = best.stderr_tail;
  return rc;
}

json RanksJson(const std::vector<RankRecord>& records) {
  json ranks = json::array();
  for (const RankRecord& r : records) {
    json rank = RankExitJson(r.exit);
    rank["restart_count"] = r.restart_count;
    rank["rank"] = r.rank;
    rank["local_rank"] = r.local_rank;
    rank["pid"] = r.pid > 0 ? json(r.pid) : json(nullptr);
    rank["state"] = r.pid <= 0 ? "not_started" : !r.exit ? "not_reaped" : "exited";
    rank["exited_while_running"] = r.exited_while_running;
    ranks.push_back(std::move(rank));
  }
  return ranks;
}

json StuckJson(const std::vector<sys::ProcInfo>& stuck) {
  json list = json::array();
  for (const sys::ProcInfo& info : stuck) {
    list.push_back({{"pid", info.pid},
                    {"pgid", info.pgid},
                    {"comm", info.comm},
                    {"state", std::string(1, info.state)},
                    {"wchan", info.wchan}});
  }
  return list;
}

json SummaryJson(const SummaryInput& in, const std::optional<RootCause>& best,
                 const std::vector<std::string>& hints, Outcome outcome, int exit_code) {
  json j;
  j["exit_code"] = exit_code;
  j["outcome"] = std::string(OutcomeName(outcome));
  j["exit_class"] = std::string(ExitClassName(RowOf(outcome).exit_class));
  j["exit_scheme"] = std::string(ExitSchemeName(in.exit_scheme));
  j["rank_exit_code"] = in.exit_code;
  j["signal"] = in.final_state.cause == StopCause::kSignal
                    ? json(SignalName(in.final_state.stop_signal))
                    : json(nullptr);
  j["unhealthy"] = in.final_state.cause == StopCause::kUnhealthy ? json(in.final_state.unhealthy)
                                                                 : json(nullptr);
  j["restarts"] = in.restarts;
  j["max_restarts"] = in.max_restarts;
  j["node_rank"] = in.node_rank;
  j["host"] = in.host;
  j["child_watcher"] = in.child_watcher;
  j["start_time"] = in.start_time;
  j["end_time"] = in.end_time;
  j["root_cause"] = best ? RootCauseJson(*best) : json(nullptr);
  j["ranks"] = RanksJson(in.records);
  j["stuck"] = StuckJson(in.stuck);
  j["start_error"] = in.start_error ? json(in.start_error->Format()) : json(nullptr);
  j["hints"] = hints;
  j["job"] = in.job_json.is_null() ? json(nullptr) : in.job_json;
  j["log_bytes_dropped"] = in.log_bytes_dropped;
  return j;
}

// ---- the parent launcher's error file ----

// The message of a failure no rank's error file describes, most specific first.
std::string FailureMessage(const SummaryInput& in) {
  if (in.start_error) return in.start_error->Format();
  if (in.final_state.cause == StopCause::kSignal) {
    return "gculaunch stopped by " + SignalName(in.final_state.stop_signal);
  }
  if (!in.job_cause.empty()) return in.job_cause;
  if (!in.stuck.empty()) return "ranks could not be killed: " + in.stuck.front().Describe();
  return "gculaunch failed with exit code " + std::to_string(in.exit_code);
}

// The root cause's own error file when @record wrote it (nested form), else one in that form.
json ParentError(const SummaryInput& in, const std::optional<RootCause>& best) {
  json parent;
  if (in.final_state.cause == StopCause::kUnhealthy) {
    // The parent (a pod's termination message) learns why this node left, not the last rank.
    parent = {
        {"message",
         {{"message", "node unhealthy: " + in.final_state.unhealthy},
          {"extraInfo",
           {{"py_callstack", ""},
            {"timestamp", std::to_string(static_cast<long long>(std::floor(in.end_time)))}}}}}};
  } else if (best && best->from_error_file) {
    auto file = in.error_files.find({best->restart_count, best->local_rank});
    auto parsed = ParseErrorFile(file->second);
    if (parsed.ok() && parsed->nested) parent = parsed->document;
  }
  if (parent.is_null()) {
    const std::string message = best ? best->message : FailureMessage(in);
    const std::string traceback = best ? best->traceback : "";
    const double timestamp = best ? best->timestamp : in.end_time;
    parent = {{"message",
               {{"message", message},
                {"extraInfo",
                 {{"py_callstack", traceback},
                  {"timestamp", std::to_string(static_cast<long long>(std::floor(timestamp)))}}}}}};
  }
  parent["message"]["errorCode"] = in.exit_code;
  return parent;
}

// ---- the termination message ----

// "rank 1 (local rank 1) on node 0 hostA, attempt 2: exit code 3".
std::string FailedRankLine(const SummaryInput& in, const RootCause& best) {
  return "rank " + std::to_string(best.rank) + " (local rank " + std::to_string(best.local_rank) +
         ") on node " + std::to_string(in.node_rank) + (in.host.empty() ? "" : " " + in.host) +
         ", attempt " + std::to_string(best.restart_count) + ": " + best.exit.Describe();
}

// Most important first: the outcome and its code, the failing rank and where, the exception's
// last line, the job's cause, the stop's lines; then the rank's last stderr lines.
std::string TerminationMessage(const SummaryInput& in, const std::optional<RootCause>& best,
                               Outcome outcome, int exit_code) {
  const OutcomeRow& row = RowOf(outcome);
  std::vector<std::string> head{"gculaunch: exit " + std::to_string(exit_code) + " (" +
                                std::string(ExitClassName(row.exit_class)) +
                                "): " + std::string(row.name) + ": " + std::string(row.wording)};
  if (outcome == Outcome::kSuccess) return head.front() + "\n";
  std::vector<std::string> tail;
  std::string title;
  if (best) {
    head.push_back(FailedRankLine(in, *best));
    if (!best->message.empty()) head.push_back(best->message);
    tail = best->stderr_tail;
    title = "last " + std::to_string(tail.size()) + " line(s) of rank " +
            std::to_string(best->rank) + "'s stderr:";
  }
  if (!in.job_cause.empty()) head.push_back(in.job_cause);
  if (in.start_error) head.push_back(in.start_error->Format());
  if (in.final_state.cause == StopCause::kSignal) {
    head.push_back("stopped by " + SignalName(in.final_state.stop_signal));
  }
  if (!in.final_state.loop_stop.empty()) head.push_back(in.final_state.loop_stop);
  for (const sys::ProcInfo& info : in.stuck) head.push_back("stuck: " + info.Describe());
  return FitTerminationMessage(head, title, tail);
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

Outcome OutcomeOf(const SummaryInput& input) {
  if (input.exit_code == exit_code::kStuckProcesses && !input.stuck.empty()) {
    return Outcome::kStuck;
  }
  // This node's own signal or health verdict wins over what the job says of the others.
  if (input.job_outcome && input.final_state.cause != StopCause::kSignal &&
      input.final_state.cause != StopCause::kUnhealthy) {
    return *input.job_outcome;
  }
  if (!input.final_state.loop_stop.empty()) return Outcome::kSameFailure;
  switch (input.final_state.cause) {
    case StopCause::kSuccess:
      return Outcome::kSuccess;
    case StopCause::kRankFailed:
      return Outcome::kRankFailed;
    case StopCause::kSignal:
      return Outcome::kSignal;
    case StopCause::kSpawnFailed:
      // Out of descriptors, processes or memory: not the program's fault (spawner.cc).
      return input.exit_code == exit_code::kNoResources ? Outcome::kNoResources
                                                        : Outcome::kSpawnFailed;
    case StopCause::kHang:
      return Outcome::kHang;
    case StopCause::kUnhealthy:
      return Outcome::kUnhealthy;
    case StopCause::kJob:
    case StopCause::kNone:
      break;
  }
  return Outcome::kInternal;
}

json RankExitJson(const std::optional<WorkerExit>& exit) {
  json j;
  if (!exit) {
    j["exit_code"] = nullptr;
    j["signal"] = nullptr;
    j["shell_code"] = nullptr;
  } else if (exit->kind == WorkerExit::Kind::kSignaled) {
    j["exit_code"] = nullptr;
    j["signal"] = SignalName(exit->value);
    j["shell_code"] = exit->ShellCode();
  } else {
    j["exit_code"] = exit->value;
    j["signal"] = nullptr;
    j["shell_code"] = exit->ShellCode();
  }
  return j;
}

std::string FitTerminationMessage(const std::vector<std::string>& head, const std::string& title,
                                  const std::vector<std::string>& tail, size_t limit) {
  std::string text;
  for (const std::string& line : head) {
    if (text.size() + 1 >= limit) break;
    text += line.substr(0, limit - text.size() - 1);  // a line too long for the rest is cut
    text += '\n';
  }
  if (tail.empty() || text.size() + title.size() + 1 >= limit) return text;
  // The last lines of the tail that fit, in their order.
  size_t room = limit - text.size() - title.size() - 1;
  auto first = tail.end();
  while (first != tail.begin() && std::prev(first)->size() + 1 <= room) {
    --first;
    room -= first->size() + 1;
  }
  if (first == tail.end()) return text;
  text += title + "\n";
  for (auto it = first; it != tail.end(); ++it) text += *it + "\n";
  return text;
}

std::string EarlyTerminationMessage(Outcome outcome, int exit_code, const std::string& line) {
  const OutcomeRow& row = RowOf(outcome);
  return FitTerminationMessage({"gculaunch: exit " + std::to_string(exit_code) + " (" +
                                    std::string(ExitClassName(row.exit_class)) +
                                    "): " + std::string(row.name) + ": " + std::string(row.wording),
                                line},
                               "", {});
}

ExitSummary BuildExitSummary(const SummaryInput& in) {
  ExitSummary out;
  out.root_cause = FindRootCause(in);
  out.hints = Hints(in);
  out.outcome = OutcomeOf(in);
  out.exit_code = SchemeExitCode(in.exit_scheme, out.outcome, in.exit_code);
  if (in.exit_code != 0) {
    out.text = TextLines(in, out.root_cause, out.hints, out.outcome, out.exit_code);
  }
  if (in.log_bytes_dropped > 0) {
    // Whatever the outcome: the logs are incomplete (the writer warned as it happened).
    out.text.insert(out.text.begin(), "warning: " + std::to_string(in.log_bytes_dropped) +
                                          " bytes of rank output are missing from the log "
                                          "files (their file system was full)");
  }
  out.json = SummaryJson(in, out.root_cause, out.hints, out.outcome, out.exit_code);
  if (in.exit_code != 0) out.parent_error = ParentError(in, out.root_cause);
  out.termination_message = TerminationMessage(in, out.root_cause, out.outcome, out.exit_code);
  return out;
}

}  // namespace gculaunch
