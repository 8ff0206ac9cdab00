#include "launcher/ops/event_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>

#include "launcher/run/exit_summary.h"

namespace gculaunch {

namespace {

// ISO 8601 in UTC with milliseconds: "2026-11-24T11:02:02.123Z".
std::string IsoTime(double unix_time) {
  const auto whole = static_cast<std::time_t>(std::floor(unix_time));
  int ms = static_cast<int>(std::lround((unix_time - static_cast<double>(whole)) * 1000));
  std::time_t secs = whole;
  if (ms >= 1000) {
    ms -= 1000;
    ++secs;
  }
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char text[96];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return text;
}

// Seconds with millisecond precision (JSON numbers: no "1e-05" noise for durations).
double Millis(double seconds) { return std::round(seconds * 1000.0) / 1000.0; }

// The event's own fields, by kind (docs/operations.md).
void AddFields(nlohmann::json& j, const JobEvent& e) {
  using K = JobEvent::Kind;
  switch (e.kind) {
    case K::kLaunch:
      if (e.launch.is_object()) j.update(e.launch);
      break;
    case K::kRendezvous:
      j["epoch"] = e.epoch;
      j["nodes"] = e.nodes;
      j["world_size"] = e.world_size;
      j["duration_s"] = Millis(e.duration_s);
      break;
    case K::kRankStart:
      j["epoch"] = e.epoch;
      j["rank"] = e.rank;
      j["local_rank"] = e.local_rank;
      j["pid"] = e.pid;
      break;
    case K::kRankExit:
      j["epoch"] = e.epoch;
      j["rank"] = e.rank;
      j["local_rank"] = e.local_rank;
      j["pid"] = e.pid;
      if (e.exit) j.update(RankExitJson(e.exit));  // the one shape (exit_summary.h)
      break;
    case K::kRestart:
      j["epoch"] = e.restarts;
      j["restarts_used"] = e.restarts;
      j["max_restarts"] = e.max_restarts;
      j["reason"] = e.reason;
      j["since_stop_s"] =
          e.duration_s < 0 ? nlohmann::json() : nlohmann::json(Millis(e.duration_s));
      j["backoff_s"] = Millis(e.backoff_s);
      break;
    case K::kBackoff:
      j["epoch"] = e.restarts;
      j["restarts_used"] = e.restarts;
      j["backoff_s"] = Millis(e.backoff_s);
      j["reason"] = e.reason;
      break;
    case K::kNodeJoin:
      j["node"] = e.node;
      j["host"] = e.host;
      j["addr"] = e.addr;
      break;
    case K::kNodeLoss:
      j["node"] = e.node;
      j["reason"] = e.reason;
      break;
    case K::kNodeReturn:
      j["node"] = e.node;
      j["addr"] = e.addr;
      break;
    case K::kHeartbeat:
      j["node"] = e.node;
      break;
    case K::kHang:
      j["epoch"] = e.epoch;
      j["timeout_s"] = Millis(e.timeout_s);
      j["silent_s"] = Millis(e.silent_s);
      j["action"] = e.action;
      j["odd_ranks"] = e.odd_ranks;
      j["reason"] = e.reason;
      break;
    case K::kStop:
      j["exit_code"] = e.exit_code;
      j["reason"] = e.reason;  // the outcome's name, as before "outcome" was added
      j["outcome"] = std::string(OutcomeName(e.outcome));
      j["exit_class"] = std::string(ExitClassName(RowOf(e.outcome).exit_class));
      j["rank_exit_code"] = e.rank_exit_code;
      break;
    case K::kUnhealthy:
      j["epoch"] = e.epoch;
      j["cards"] = e.cards;
      j["reason"] = e.reason;
      break;
    case K::kDeviceMemoryWait:
      j["epoch"] = e.epoch;
      j["waited_s"] = Millis(e.duration_s);
      j["freed"] = e.freed;
      j["cards"] = e.cards;
      j["held"] = e.reason;
      break;
  }
}

}  // namespace

std::string FormatEventLine(const JobEvent& event, double unix_time, const std::string& run_id,
                            int node_rank) {
  nlohmann::ordered_json head;
  head["schema"] = kEventSchema;
  head["ts"] = Millis(unix_time);
  head["time"] = IsoTime(unix_time);
  head["event"] = EventName(event.kind);
  head["run_id"] = run_id;
  head["node_rank"] = node_rank;
  nlohmann::json fields;
  AddFields(fields, event);
  // The fields keep a stable order: the head first, then the event's own (sorted).
  for (auto& [key, value] : fields.items()) {
    if (!head.contains(key)) head[key] = value;
  }
  // Rank output in a reason may hold invalid UTF-8: replace it rather than throw.
  return head.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<std::unique_ptr<EventLog>> EventLog::Open(const sys::HeldDir& dir, const std::string& name,
                                                 std::string run_id, int node_rank) {
  auto fd = dir.OpenFile(name, O_WRONLY | O_CREAT | O_APPEND);
  if (!fd.ok()) {
    return Error{"the event log: " + fd.error().what, "check that the log directory is writable"};
  }
  return std::unique_ptr<EventLog>(
      new EventLog(fd->Release(), dir.PathOf(name), std::move(run_id), node_rank));
}

EventLog::EventLog(int fd, std::string path, std::string run_id, int node_rank)
    : fd_(fd), path_(std::move(path)), run_id_(std::move(run_id)), node_rank_(node_rank) {}

EventLog::~EventLog() { ::close(fd_); }

void EventLog::On(const JobEvent& event) {
  if (event.kind == JobEvent::Kind::kHeartbeat) return;
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const double unix_time = static_cast<double>(now.tv_sec) + now.tv_nsec / 1e9;
  const std::string line = FormatEventLine(event, unix_time, run_id_, node_rank_) + "\n";
  // O_APPEND and one write: a reader never sees half a line from this process.
  const ssize_t n = ::write(fd_, line.data(), line.size());
  if (n != static_cast<ssize_t>(line.size())) ++write_errors_;
}

}  // namespace gculaunch
