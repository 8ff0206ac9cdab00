#include "launcher/cluster/job_protocol.h"

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "base/exit_codes.h"

namespace gculaunch::job {

using nlohmann::json;

std::string JoinSeqKey(int node) { return "job/joinseq/" + std::to_string(node); }
std::string JoinKey(int node, int seq) {
  return "job/join/" + std::to_string(node) + "/" + std::to_string(seq);
}
std::string AdmitKey(int node, int seq) {
  return "job/admit/" + std::to_string(node) + "/" + std::to_string(seq);
}
std::string DumpKey(int request, int node) {
  return "job/dump/" + std::to_string(request) + "/" + std::to_string(node);
}
std::string ProgressKey(int node) { return "job/progress/" + std::to_string(node); }
std::string PlanKey(int epoch) { return "job/plan/" + std::to_string(epoch); }
std::string NodePlanKey(int epoch, int node) {
  return "job/nodeplan/" + std::to_string(epoch) + "/" + std::to_string(node);
}
std::string StopKey(int epoch) { return "job/stop/" + std::to_string(epoch); }
std::string DoneKey(int epoch, int node) {
  return "job/done/" + std::to_string(epoch) + "/" + std::to_string(node);
}
std::string ReapedKey(int epoch, int node) {
  return "job/reaped/" + std::to_string(epoch) + "/" + std::to_string(node);
}
std::string HeartbeatKey(int node, int seq) {
  return "job/hb/" + std::to_string(node) + "/" + std::to_string(seq);
}
std::string ByeKey(int node, int seq) {
  return "job/bye/" + std::to_string(node) + "/" + std::to_string(seq);
}
// Under gculaunch/ on the wire: the ranks' own keys share the store and must never collide
// with the job's.
std::string KeyForSocket(const std::string& key) { return "gculaunch/" + key; }

namespace {

// Field readers: the decoders accept only what the encoders write, so a peer running
// another gculaunch version (or anything else writing these keys) is named clearly.
Result<json> ParseObject(std::string_view text, const char* what) {
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Error{std::string(what) + " is not a JSON object",
                 "run the same gculaunch version on every node"};
  }
  return doc;
}

Error FieldError(const char* what, const char* field, const std::string& problem) {
  return Error{std::string(what) + " field '" + field + "': " + problem,
               "run the same gculaunch version on every node"};
}

Result<int> IntField(const json& doc, const char* what, const char* field, int min) {
  auto it = doc.find(field);
  if (it == doc.end() || !it->is_number_integer()) {
    return FieldError(what, field, "expected a whole number");
  }
  const auto value = it->get<long long>();
  // The upper bound keeps any sum or count of these numbers far from int overflow.
  if (value < min || value > (1LL << 30)) {
    return FieldError(what, field, "expected a number >= " + std::to_string(min));
  }
  return static_cast<int>(value);
}

// A field newer gculaunch versions write; `fallback` when it is absent.
Result<int> OptIntField(const json& doc, const char* what, const char* field, int min,
                        int fallback) {
  if (doc.find(field) == doc.end()) return fallback;
  return IntField(doc, what, field, min);
}

Result<std::string> TextField(const json& doc, const char* what, const char* field) {
  auto it = doc.find(field);
  if (it == doc.end() || !it->is_string()) return FieldError(what, field, "expected text");
  return it->get<std::string>();
}

json MarkerJson(const StopMarker& m) {
  return {{"kind", KindName(m.kind)},
          {"epoch", m.epoch},
          {"restarts", m.restarts},
          {"node", m.node},
          {"host", m.host},
          {"addr", m.addr},
          {"rank", m.rank},
          {"local_rank", m.local_rank},
          {"exit_code", m.exit_code},
          {"what", m.what},
          {"restartable", m.restartable}};
}

Result<StopMarker> MarkerFrom(const json& doc) {
  const char* what = "stop marker";
  StopMarker m;
  auto kind = TextField(doc, what, "kind");
  if (!kind.ok()) return kind.error();
  // Decoded by name, through the encoder's own KindName, so that the two never drift apart.
  bool known = false;
  for (auto k :
       {StopMarker::Kind::kRankFailed, StopMarker::Kind::kNodeLost, StopMarker::Kind::kNodeLeft,
        StopMarker::Kind::kSuccess, StopMarker::Kind::kJobError, StopMarker::Kind::kNodeJoined,
        StopMarker::Kind::kHang, StopMarker::Kind::kSameFailure}) {
    if (KindName(k) == *kind) {
      m.kind = k;
      known = true;
    }
  }
  if (!known) return FieldError(what, "kind", "unknown kind '" + *kind + "'");
  auto epoch = IntField(doc, what, "epoch", 0);
  auto restarts = OptIntField(doc, what, "restarts", -1, -1);  // -1: an older writer's
  auto node = IntField(doc, what, "node", -1);
  auto rank = IntField(doc, what, "rank", -1);
  auto local_rank = IntField(doc, what, "local_rank", -1);
  auto code = IntField(doc, what, "exit_code", 0);
  auto host = TextField(doc, what, "host");
  auto addr = TextField(doc, what, "addr");
  auto text = TextField(doc, what, "what");
  for (const Result<int>* r : {&epoch, &restarts, &node, &rank, &local_rank, &code}) {
    if (!r->ok()) return r->error();
  }
  for (const Result<std::string>* r : {&host, &addr, &text}) {
    if (!r->ok()) return r->error();
  }
  auto restartable = doc.find("restartable");
  if (restartable == doc.end() || !restartable->is_boolean()) {
    return FieldError(what, "restartable", "expected true or false");
  }
  m.epoch = *epoch;
  m.restarts = *restarts;
  m.node = *node;
  m.rank = *rank;
  m.local_rank = *local_rank;
  m.exit_code = *code;
  m.host = *host;
  m.addr = *addr;
  m.what = *text;
  m.restartable = restartable->get<bool>();
  return m;
}

}  // namespace

Outcome OutcomeOfKind(StopMarker::Kind kind) {
  switch (kind) {
    case StopMarker::Kind::kRankFailed:
      return Outcome::kRankFailed;
    case StopMarker::Kind::kNodeLost:
      return Outcome::kNodeLost;
    case StopMarker::Kind::kNodeLeft:
      return Outcome::kNodeLeft;
    case StopMarker::Kind::kSuccess:
      return Outcome::kSuccess;
    case StopMarker::Kind::kJobError:
      return Outcome::kJobError;
    case StopMarker::Kind::kNodeJoined:
      return Outcome::kNodeJoined;
    case StopMarker::Kind::kHang:
      return Outcome::kHang;
    case StopMarker::Kind::kSameFailure:
      return Outcome::kSameFailure;
  }
  return Outcome::kInternal;
}

// The outcome table's name (base/outcome.h): the names on the wire are the outcomes' own.
std::string KindName(StopMarker::Kind kind) {
  return std::string(OutcomeName(OutcomeOfKind(kind)));
}

// error_handler_t::replace throughout: a host name or a message may hold bytes that are not
// UTF-8, and the job must still be able to say it.
std::string Encode(const NodeRegistration& r) {
  return json{{"node_rank", r.node_rank},
              {"nnodes", r.nnodes},
              {"min_nodes", r.min_nodes},
              {"nproc", r.nproc},
              {"max_restarts", r.max_restarts},
              {"hang", r.hang},
              {"run_id", r.run_id},
              {"host", r.host},
              {"addr", r.addr},
              {"pid", r.pid},
              {"incarnation", r.incarnation},
              {"last_epoch", r.last_epoch},
              {"last_restarts", r.last_restarts},
              {"node_plans", r.node_plans}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string Encode(const StopMarker& marker) {
  return MarkerJson(marker).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string Encode(const JobPlan& plan) {
  json nodes = json::array();
  for (const PlanNode& n : plan.nodes) {
    nodes.push_back({{"node_rank", n.node_rank},
                     {"id", n.id},
                     {"nproc", n.nproc},
                     {"rank_offset", n.rank_offset},
                     {"host", n.host},
                     {"addr", n.addr}});
  }
  json doc = {{"epoch", plan.epoch},           {"restarts", plan.restarts},
              {"world_size", plan.world_size}, {"ranks_port", plan.ranks_port},
              {"backoff_s", plan.backoff_s},   {"nodes", std::move(nodes)}};
  if (plan.nnodes > 0) {  // a node's own plan; a reader before them ignores these fields
    doc["nnodes"] = plan.nnodes;
    doc["leader_addr"] = plan.leader_addr;
  }
  doc["abort"] = plan.abort ? MarkerJson(*plan.abort) : json(nullptr);
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<NodeRegistration> DecodeRegistration(std::string_view text) {
  const char* what = "node registration";
  auto doc = ParseObject(text, what);
  if (!doc.ok()) return doc.error();
  NodeRegistration r;
  auto node = IntField(*doc, what, "node_rank", 0);
  auto nnodes = IntField(*doc, what, "nnodes", 1);
  auto nproc = IntField(*doc, what, "nproc", 1);
  auto restarts = IntField(*doc, what, "max_restarts", 0);
  auto pid = IntField(*doc, what, "pid", 0);
  auto last_epoch = IntField(*doc, what, "last_epoch", -1);
  auto min_nodes = OptIntField(*doc, what, "min_nodes", 0, 0);
  auto last_restarts = OptIntField(*doc, what, "last_restarts", -1, -1);
  for (const Result<int>* f :
       {&node, &nnodes, &nproc, &restarts, &pid, &last_epoch, &min_nodes, &last_restarts}) {
    if (!f->ok()) return f->error();
  }
  auto run_id = TextField(*doc, what, "run_id");
  auto host = TextField(*doc, what, "host");
  auto addr = TextField(*doc, what, "addr");
  auto incarnation = TextField(*doc, what, "incarnation");
  for (const Result<std::string>* f : {&run_id, &host, &addr, &incarnation}) {
    if (!f->ok()) return f->error();
  }
  r.node_rank = *node;
  r.nnodes = *nnodes;
  r.nproc = *nproc;
  r.max_restarts = *restarts;
  r.pid = *pid;
  r.run_id = *run_id;
  r.host = *host;
  r.addr = *addr;
  r.incarnation = *incarnation;
  r.last_epoch = *last_epoch;
  r.min_nodes = *min_nodes;
  r.last_restarts = *last_restarts;
  if (auto plans = doc->find("node_plans"); plans != doc->end()) {  // absent: an older one
    if (!plans->is_boolean()) return FieldError(what, "node_plans", "expected true or false");
    r.node_plans = plans->get<bool>();
  }
  if (doc->contains("hang")) {  // absent: a version before --hang-timeout, which agrees
    auto hang = TextField(*doc, what, "hang");
    if (!hang.ok()) return hang.error();
    r.hang = *hang;
  }
  return r;
}

Result<StopMarker> DecodeMarker(std::string_view text) {
  auto doc = ParseObject(text, "stop marker");
  if (!doc.ok()) return doc.error();
  return MarkerFrom(*doc);
}

std::string Encode(const AttemptReport& report) {
  return json{{"signature", report.signature},
              {"progress", report.progress ? json(*report.progress) : json(nullptr)}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<AttemptReport> DecodeReport(std::string_view text) {
  const char* what = "reaped report";
  AttemptReport report;
  if (text == "1") return report;
  auto doc = ParseObject(text, what);
  if (!doc.ok()) return doc.error();
  auto signature = TextField(*doc, what, "signature");
  if (!signature.ok()) return signature.error();
  report.signature = *signature;
  auto progress = doc->find("progress");
  if (progress == doc->end() || (!progress->is_null() && !progress->is_number_integer())) {
    return FieldError(what, "progress", "expected a whole number or null");
  }
  if (!progress->is_null()) report.progress = progress->get<std::int64_t>();
  return report;
}

Result<JobPlan> DecodePlan(std::string_view text) {
  const char* what = "job plan";
  auto doc = ParseObject(text, what);
  if (!doc.ok()) return doc.error();
  JobPlan plan;
  auto epoch = IntField(*doc, what, "epoch", 0);
  auto world = IntField(*doc, what, "world_size", 0);
  auto port = IntField(*doc, what, "ranks_port", 0);
  auto restarts = OptIntField(*doc, what, "restarts", -1, -1);
  for (const Result<int>* f : {&epoch, &world, &port, &restarts}) {
    if (!f->ok()) return f->error();
  }
  // Every rank of the epoch would get this MASTER_PORT: a wrong one must stop here.
  if (*port > 65535) return FieldError(what, "ranks_port", "expected a port 0-65535");
  plan.epoch = *epoch;
  plan.restarts = *restarts;
  plan.world_size = *world;
  plan.ranks_port = *port;
  if (auto backoff = doc->find("backoff_s"); backoff != doc->end() && !backoff->is_null()) {
    if (!backoff->is_number() || backoff->get<double>() < 0) {
      return FieldError(what, "backoff_s", "expected a number >= 0");
    }
    plan.backoff_s = backoff->get<double>();
  }
  auto abort = doc->find("abort");
  if (abort != doc->end() && !abort->is_null()) {
    if (!abort->is_object()) return FieldError(what, "abort", "expected an object or null");
    auto marker = MarkerFrom(*abort);
    if (!marker.ok()) return marker.error();
    plan.abort = *marker;
  }
  auto nodes = doc->find("nodes");
  if (nodes == doc->end() || !nodes->is_array()) {
    return FieldError(what, "nodes", "expected a list");
  }
  if (doc->contains("nnodes")) {  // a node's own plan
    auto nnodes = IntField(*doc, what, "nnodes", 1);
    if (!nnodes.ok()) return nnodes.error();
    auto leader = TextField(*doc, what, "leader_addr");
    if (!leader.ok()) return leader.error();
    plan.nnodes = *nnodes;
    plan.leader_addr = *leader;
  }
  int next_offset = 0;
  for (const json& n : *nodes) {
    if (!n.is_object()) return FieldError(what, "nodes", "expected a list of objects");
    PlanNode node;
    auto rank = IntField(n, what, "node_rank", 0);
    auto nproc = IntField(n, what, "nproc", 1);
    auto offset = IntField(n, what, "rank_offset", 0);
    auto id = OptIntField(n, what, "id", 0, rank.ok() ? *rank : 0);
    for (const Result<int>* f : {&rank, &nproc, &offset, &id}) {
      if (!f->ok()) return f->error();
    }
    auto host = TextField(n, what, "host");
    auto addr = TextField(n, what, "addr");
    if (!host.ok()) return host.error();
    if (!addr.ok()) return addr.error();
    // The ranks' RANK values come from these offsets: a gap or an overlap would give two ranks
    // one RANK, so the plan must be exactly 0, 1, ... with contiguous offsets; a node's own
    // plan holds one entry, inside the job.
    if (plan.nnodes > 0) {
      if (!plan.nodes.empty() || *rank >= plan.nnodes ||
          static_cast<std::int64_t>(*offset) + *nproc > plan.world_size) {
        return FieldError(what, "nodes", "a node's own plan holds one node inside the job");
      }
    } else if (*rank != static_cast<int>(plan.nodes.size()) || *offset != next_offset) {
      return FieldError(what, "nodes", "node ranks or rank offsets are out of order");
    }
    node.node_rank = *rank;
    node.id = *id;
    node.nproc = *nproc;
    node.rank_offset = *offset;
    node.host = *host;
    node.addr = *addr;
    next_offset += node.nproc;
    plan.nodes.push_back(std::move(node));
  }
  // An abort plan carries no ranks to start, so its sizes need not add up.
  if (plan.abort) return plan;
  if (plan.nnodes > 0 && plan.nodes.empty()) {
    return FieldError(what, "nodes", "a node's own plan holds one node inside the job");
  }
  if (plan.nnodes == 0 && next_offset != plan.world_size) {
    return FieldError(what, "world_size", "is not the sum of the nodes' nproc");
  }
  return plan;
}

JobPlan PlanFor(const JobPlan& plan, const PlanNode& entry) {
  JobPlan own;
  own.epoch = plan.epoch;
  own.restarts = plan.restarts;
  own.world_size = plan.world_size;
  own.ranks_port = plan.ranks_port;
  own.backoff_s = plan.backoff_s;
  own.nodes = {entry};
  own.nnodes = NodeCount(plan);
  own.leader_addr = LeaderAddr(plan);
  return own;
}

int NodeCount(const JobPlan& plan) {
  return plan.nnodes > 0 ? plan.nnodes : static_cast<int>(plan.nodes.size());
}

std::string LeaderAddr(const JobPlan& plan) {
  if (plan.nnodes > 0) return plan.leader_addr;
  return plan.nodes.empty() ? std::string() : plan.nodes[0].addr;
}

JobPlan MakePlanForTest(std::vector<NodeRegistration> regs, int epoch, int ranks_port) {
  std::sort(regs.begin(), regs.end(), [](const NodeRegistration& a, const NodeRegistration& b) {
    return a.node_rank < b.node_rank;
  });
  return MakeOrderedPlan(regs, epoch, ranks_port);
}

// Node ranks follow the order given (the coordinator's join order), not the registrations'
// own node ranks: an elastic job renumbers its nodes every epoch.
JobPlan MakeOrderedPlan(const std::vector<NodeRegistration>& regs, int epoch, int ranks_port) {
  JobPlan plan;
  plan.epoch = epoch;
  plan.ranks_port = ranks_port;
  int offset = 0;
  for (const NodeRegistration& r : regs) {
    const int rank = static_cast<int>(plan.nodes.size());
    plan.nodes.push_back({rank, r.nproc, offset, r.host, r.addr, r.node_rank});
    offset += r.nproc;
  }
  plan.world_size = offset;
  return plan;
}

// The run id first: a node of another job that reached this store by a wrong MASTER_ADDR is
// told so, rather than that its sizes differ.
Status CheckIdentity(const NodeRegistration& reg, const NodeRegistration& node0) {
  if (reg.run_id == node0.run_id) return OkStatus();
  return Error{NodeName(reg.node_rank, reg.host, reg.addr) + " belongs to job '" + reg.run_id +
                   "' but the job at this MASTER_ADDR:MASTER_PORT is '" + node0.run_id + "'",
               "give every node of a job the same run id (--rdzv-id, or the platform's job "
               "name) and every job its own MASTER_ADDR:MASTER_PORT"};
}

Status CheckRegistration(const NodeRegistration& reg, const NodeRegistration& node0) {
  const std::string who = NodeName(reg.node_rank, reg.host, reg.addr);
  const std::string node0_name = NodeName(node0.node_rank, node0.host, node0.addr);
  const auto low = [](const NodeRegistration& r) { return Elastic(r) ? r.min_nodes : r.nnodes; };
  if (reg.nnodes != node0.nnodes || low(reg) != low(node0)) {
    const auto count = [](const NodeRegistration& r) {
      return Elastic(r) ? std::to_string(r.min_nodes) + ":" + std::to_string(r.nnodes)
                        : std::to_string(r.nnodes);
    };
    return Error{
        who + " expects " + count(reg) + " nodes but " + node0_name + " expects " + count(node0),
        "give every node the same number of nodes (WORLD_SIZE, --nnodes)"};
  }
  if (Elastic(reg) != Elastic(node0)) {
    const auto how = [](const NodeRegistration& r) {
      return Elastic(r) ? std::string("has its node rank assigned at rendezvous")
                        : "was given node rank " + std::to_string(r.node_rank);
    };
    return Error{who + " " + how(reg) + " but " + node0_name + " " + how(node0),
                 "give every node a node rank (RANK / --node-rank), or none"};
  }
  if (!Elastic(node0) && (reg.node_rank < 0 || reg.node_rank >= node0.nnodes)) {
    return Error{who + " has a node rank outside 0.." + std::to_string(node0.nnodes - 1),
                 "check RANK / --node-rank on that node"};
  }
  if (reg.max_restarts != node0.max_restarts) {
    return Error{who + " allows " + std::to_string(reg.max_restarts) + " restarts but " +
                     node0_name + " allows " + std::to_string(node0.max_restarts),
                 "give every node the same --max-restarts"};
  }
  // Empty: a version that does not say; only two stated settings can disagree.
  if (!reg.hang.empty() && !node0.hang.empty() && reg.hang != node0.hang) {
    return Error{who + " runs with " + reg.hang + " but " + node0_name + " with " + node0.hang,
                 "give every node the same --hang-timeout and --on-hang"};
  }
  return OkStatus();
}

bool Restartable(const StopMarker& marker, int max_restarts) {
  if (marker.kind == StopMarker::Kind::kNodeJoined) return true;  // membership: free
  const bool reform =
      marker.kind == StopMarker::Kind::kRankFailed || marker.kind == StopMarker::Kind::kNodeLost ||
      marker.kind == StopMarker::Kind::kNodeLeft || marker.kind == StopMarker::Kind::kHang;
  return reform && marker.restartable && RestartsOf(marker) < max_restarts;
}

int ExitCodeFor(const StopMarker& marker, int self) {
  switch (marker.kind) {
    case StopMarker::Kind::kSuccess:
      return exit_code::kSuccess;
    case StopMarker::Kind::kRankFailed:
    case StopMarker::Kind::kJobError:
    case StopMarker::Kind::kSameFailure:
      return marker.exit_code;
    case StopMarker::Kind::kNodeLeft:
      // The node that left exits with its own code; for the others it is a lost node.
      return marker.node == self ? marker.exit_code : exit_code::kNodeLost;
    case StopMarker::Kind::kNodeLost:
      return exit_code::kNodeLost;
    case StopMarker::Kind::kNodeJoined:
      return exit_code::kInternal;  // never final: a join is always restartable
    case StopMarker::Kind::kHang:
      return exit_code::kHang;
  }
  return exit_code::kInternal;
}

std::string NodeName(int node, const std::string& host, const std::string& addr) {
  std::string out = "node " + std::to_string(node);
  if (host.empty() && addr.empty()) return out;
  out += " (";
  out += host;
  if (!host.empty() && !addr.empty()) out += ", ";
  out += addr;
  out += ")";
  return out;
}

std::string Describe(const StopMarker& m) {
  const std::string node = NodeName(m.node, m.host, m.addr);
  switch (m.kind) {
    case StopMarker::Kind::kRankFailed:
      // rank -1: the node could not start any rank, so none is named.
      if (m.rank < 0) return "the ranks on " + node + " could not be started: " + m.what;
      return "rank " + std::to_string(m.rank) + " (local rank " + std::to_string(m.local_rank) +
             ") on " + node + (m.restartable ? " failed with " : " could not be started: ") +
             m.what;
    case StopMarker::Kind::kNodeLost:
      return node + " was lost: " + m.what;
    case StopMarker::Kind::kNodeLeft:
      return node + " left the job: " + m.what;
    case StopMarker::Kind::kNodeJoined:
      return node + " joined the job: " + m.what;
    case StopMarker::Kind::kSuccess:
      return "every node's ranks finished successfully";
    case StopMarker::Kind::kJobError:
    case StopMarker::Kind::kSameFailure:
      return m.what;
    case StopMarker::Kind::kHang:
      return "the job hung: " + m.what;
  }
  return m.what;
}

}  // namespace gculaunch::job
