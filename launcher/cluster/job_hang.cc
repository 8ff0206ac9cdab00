#include "launcher/cluster/job_hang.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/duration.h"
#include "base/exit_codes.h"

namespace gculaunch::job {

using nlohmann::json;

std::chrono::milliseconds HangCheckPeriod(double timeout_s, int nodes) {
  // A tenth of the timeout keeps a report's staleness small against it; the bounds keep a
  // short timeout from flooding the store and a long one from reporting too rarely to notice
  // a node that stopped reporting.  Every node reports once a period, and node 0 reads them
  // all: at 16k nodes and 500 ms that would be 32k reports a second, more than node 0 can take.
  const auto base = std::clamp(SecondsToMillis(timeout_s / 10), std::chrono::milliseconds(100),
                               std::chrono::milliseconds(500));
  const auto load = SecondsToMillis(std::max(nodes, 1) / kReportsPerSecond);
  const auto cap = std::max(base, SecondsToMillis(timeout_s / 4));
  return std::min(std::max(base, load), cap);
}

namespace {

constexpr const char* kWhat = "progress report";

// A report another node wrote that this one cannot read is a version mismatch between the
// nodes (the field names are this file's), hence the hint.
Error FieldError(const std::string& field, const std::string& problem) {
  return Error{std::string(kWhat) + " field '" + field + "': " + problem,
               "run the same gculaunch version on every node"};
}

// null, not a number: a rank without output or heartbeat yet is not "silent for 0 s".
json Age(const std::optional<double>& age) { return age ? json(*age) : json(nullptr); }

// An age: a non-negative number, or null.
Result<std::optional<double>> AgeFrom(const json& doc, const char* field) {
  auto it = doc.find(field);
  if (it == doc.end()) return FieldError(field, "missing");
  if (it->is_null()) return std::optional<double>();
  if (!it->is_number() || it->get<double>() < 0) {
    return FieldError(field, "expected a number >= 0 or null");
  }
  return std::optional<double>(it->get<double>());
}

Result<RankProgress> RankFrom(const json& doc) {
  if (!doc.is_object()) return FieldError("ranks", "expected objects");
  RankProgress r;
  for (const char* field : {"local_rank", "rank"}) {
    auto it = doc.find(field);
    if (it == doc.end() || !it->is_number_integer() || it->get<long long>() < 0) {
      return FieldError(field, "expected a whole number >= 0");
    }
  }
  r.local_rank = doc["local_rank"].get<int>();
  r.rank = doc["rank"].get<int>();
  auto running = doc.find("running");
  if (running == doc.end() || !running->is_boolean()) {
    return FieldError("running", "expected true or false");
  }
  r.running = running->get<bool>();
  auto output = AgeFrom(doc, "output_age");
  if (!output.ok()) return output.error();
  auto beat = AgeFrom(doc, "heartbeat_age");
  if (!beat.ok()) return beat.error();
  auto since = AgeFrom(doc, "since_start");
  if (!since.ok()) return since.error();
  // A running rank always has a start: null here would let a rank escape the grace rule.
  if (!*since) return FieldError("since_start", "expected a number >= 0");
  r.output_age_s = *output;
  r.heartbeat_age_s = *beat;
  r.since_start_s = **since;
  return r;
}

// Ages grow while a report waits to be read; an unknown age stays unknown.
void Older(std::optional<double>& age, double by) {
  if (age) *age += by;
}

}  // namespace

std::string Encode(const NodeProgress& report) {
  json ranks = json::array();
  for (const RankProgress& r : report.ranks) {
    ranks.push_back({{"local_rank", r.local_rank},
                     {"rank", r.rank},
                     {"running", r.running},
                     {"output_age", Age(r.output_age_s)},
                     {"heartbeat_age", Age(r.heartbeat_age_s)},
                     {"since_start", r.since_start_s}});
  }
  return json{{"node", report.node},
              {"epoch", report.epoch},
              {"seq", report.seq},
              {"timeout", report.timeout_s},
              {"ranks", ranks}}
      .dump();
}

Result<NodeProgress> DecodeProgress(std::string_view text) {
  const json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Error{std::string(kWhat) + " is not a JSON object",
                 "run the same gculaunch version on every node"};
  }
  NodeProgress report;
  for (const char* field : {"node", "epoch", "seq"}) {
    auto it = doc.find(field);
    if (it == doc.end() || !it->is_number_integer() || it->get<long long>() < 0) {
      return FieldError(field, "expected a whole number >= 0");
    }
  }
  report.node = doc["node"].get<int>();
  report.epoch = doc["epoch"].get<int>();
  report.seq = doc["seq"].get<long long>();
  auto timeout = doc.find("timeout");
  if (timeout == doc.end() || !timeout->is_number() || timeout->get<double>() < 0) {
    return FieldError("timeout", "expected a number >= 0");
  }
  report.timeout_s = timeout->get<double>();
  auto ranks = doc.find("ranks");
  if (ranks == doc.end() || !ranks->is_array()) return FieldError("ranks", "expected a list");
  for (const json& r : *ranks) {
    auto rank = RankFrom(r);
    if (!rank.ok()) return rank.error();
    report.ranks.push_back(*rank);
  }
  return report;
}

JobHangCheck CheckJobHang(int epoch, const std::vector<RankProgress>& own,
                          const std::vector<SeenProgress>& others, double timeout_s,
                          double grace_s) {
  JobHangCheck check;
  check.ranks = own;
  for (const SeenProgress& seen : others) {
    // A report of another epoch says nothing about the ranks of this one (they may still be
    // starting): such a node counts as not reported, and no verdict is made without it.
    if (!seen.report || seen.report->epoch != epoch) {
      check.unreported.push_back(seen.node);
      continue;
    }
    for (RankProgress r : seen.report->ranks) {
      Older(r.output_age_s, seen.seen_age_s);
      Older(r.heartbeat_age_s, seen.seen_age_s);
      r.since_start_s += seen.seen_age_s;
      check.ranks.push_back(r);
    }
  }
  if (check.unreported.empty()) check.verdict = CheckHang(check.ranks, timeout_s, grace_s);
  return check;
}

StopMarker HangMarker(int epoch, int restarts, const std::string& why,
                      const std::vector<NodeStacks>& parts, bool restart) {
  StopMarker m;
  m.kind = StopMarker::Kind::kHang;
  m.epoch = epoch;
  m.restarts = restarts;
  m.exit_code = exit_code::kHang;
  m.restartable = restart;
  m.what = why;
  std::vector<StackDump> all;
  // The majority is the whole job's, so that a rank is odd against every node's ranks, not
  // only its own node's; then each odd rank is found again in its node's part.
  for (const NodeStacks& part : parts) all.insert(all.end(), part.dumps.begin(), part.dumps.end());
  for (const int rank : OddRanks(all)) {
    for (const NodeStacks& part : parts) {
      for (const StackDump& d : part.dumps) {
        if (d.rank != rank) continue;
        if (m.rank < 0) {  // the marker names the first odd rank; its text names them all
          m.rank = d.rank;
          m.local_rank = d.local_rank;
          m.node = part.node_rank;
        }
        m.what += "; rank " + std::to_string(d.rank) + " (local rank " +
                  std::to_string(d.local_rank) + ") on node " + std::to_string(part.node_rank) +
                  " differs from the majority";
        const std::vector<StackFrame> frames = MainThreadFrames(d.text);
        if (!frames.empty()) m.what += ": in " + frames.front().function;
      }
    }
  }
  return m;
}

}  // namespace gculaunch::job
