#include "bench/scale/sim_node.h"

#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "launcher/frontend/rank_env.h"

namespace gculaunch::bench {
namespace {

// The value of `name` in a rank's "NAME=value" environment, or "".
std::string EnvValue(const std::vector<std::string>& env, const std::string& name) {
  const std::string prefix = name + "=";
  for (const std::string& kv : env) {
    if (kv.starts_with(prefix)) return kv.substr(prefix.size());
  }
  return "";
}

}  // namespace

RankRoute DirectRoute() {
  RankRoute route;
  route.target = [](int, const std::string& addr, std::uint16_t port) {
    return std::make_pair(addr, port);
  };
  route.source = [](int node) {
    return "127." + std::to_string(64 + (node >> 16)) + "." + std::to_string((node >> 8) & 255) +
           "." + std::to_string(node & 255);
  };
  return route;
}

SimNode::SimNode(boost::asio::io_context& io, LaunchSpec spec, std::string scratch,
                 const RankRoute& route, rendezvous::Dialect dialect, SimJobHooks& hooks,
                 spdlog::logger& log)
    : io_(io),
      spec_(std::move(spec)),
      scratch_(std::move(scratch)),
      route_(route),
      dialect_(dialect),
      hooks_(hooks),
      log_(log) {}

SimNode::~SimNode() { StopRanks(); }

void SimNode::Start() {
  ++incarnation_;
  std::error_code ignored;
  std::filesystem::create_directories(scratch_, ignored);
  LaunchChoices choices;
  choices.scratch_dir = scratch_;
  choices.launcher_pid = std::to_string(::getpid());
  const RankRuntime runtime = ResolveRankRuntime(spec_, choices);
  planner_ = std::make_unique<RankPlanner>(spec_, base_, runtime, false);
  ClusterNodeContext context{.io = io_,
                             .planner = *planner_,
                             .proxy = route_.proxy ? route_.proxy(spec_.node_rank) : nullptr,
                             .log = log_};
  auto made = MakeClusterNode(spec_, runtime, context);
  if (!made.ok()) {
    hooks_.RankFailed(spec_.node_rank, made.error().Format());
    return;
  }
  cluster_ = std::move(*made);
  cluster_->Start(*this);
  // As launch.cc does on every node: the other nodes answer node 0's stack dump requests,
  // which they poll for as long as they run (here with an empty dump).
  cluster_->ShareStacks([node = spec_.node_rank](const std::function<void(NodeStacks)>& done) {
    done(NodeStacks{node, "node " + std::to_string(node), {}, ""});
  });
}

void SimNode::StopRanks() {
  for (auto& rank : ranks_) rank->Stop();
  ranks_.clear();
}

void SimNode::JobStart(int restart_count) {
  auto plan = planner_->PlanAttempt(restart_count);
  if (!plan.ok()) {
    hooks_.RankFailed(spec_.node_rank, plan.error().Format());
    return;
  }
  StopRanks();
  running_ = true;
  const int node = spec_.node_rank;
  const int epoch = restart_count;
  std::vector<int> global_ranks;
  int world_size = 0;
  for (const RankLaunch& r : *plan) {
    RankSetup s;
    s.rank = std::atoi(EnvValue(r.env, "RANK").c_str());
    s.world_size = std::atoi(EnvValue(r.env, "WORLD_SIZE").c_str());
    s.restart_count = std::atoi(EnvValue(r.env, "TORCHELASTIC_RESTART_COUNT").c_str());
    const auto [host, port] = route_.target(
        node, EnvValue(r.env, "MASTER_ADDR"),
        static_cast<std::uint16_t>(std::atoi(EnvValue(r.env, "MASTER_PORT").c_str())));
    s.store_host = host;
    s.store_port = port;
    s.source = route_.source(node);
    s.dialect = dialect_;
    global_ranks.push_back(s.rank);
    world_size = s.world_size;
    SimJobHooks* hooks = &hooks_;
    RankEvents events;
    events.barrier = [hooks, node, epoch](double t) { hooks->RankPassed(node, epoch, t); };
    events.uid = [hooks, node, epoch](double t) { hooks->RankHasUid(node, epoch, t); };
    events.failed = [hooks, node](const std::string& what) { hooks->RankFailed(node, what); };
    ranks_.push_back(std::make_shared<SimRank>(io_, std::move(s), std::move(events)));
  }
  hooks_.NodeStarted(node, epoch, MonotonicNow(), global_ranks, world_size);
  for (auto& rank : ranks_) rank->Start();
}

void SimNode::JobStop() {
  StopRanks();
  if (!running_) return;
  running_ = false;
  boost::asio::post(io_, [this, incarnation = incarnation_] {
    if (cluster_ && incarnation == incarnation_)
      cluster_->job_link()->AttemptDrained(false, AttemptReport{});
  });
}

void SimNode::JobExit(int exit_code) {
  StopRanks();
  running_ = false;
  hooks_.NodeExited(spec_.node_rank, exit_code);
  boost::asio::post(io_, [this, exit_code, incarnation = incarnation_] {
    if (cluster_ && incarnation == incarnation_) cluster_->job_link()->Finished(exit_code);
  });
}

void SimNode::FailRank() {
  if (!cluster_ || !running_) return;
  StopRanks();
  running_ = false;
  LocalStopReport report;
  report.cause = StopCause::kRankFailed;
  report.rank = spec_.rank_offset;
  report.local_rank = 0;
  report.exit_code = 1;
  report.what = "exit code 1";
  boost::asio::post(io_, [this, report, incarnation = incarnation_] {
    if (!cluster_ || incarnation != incarnation_) return;
    cluster_->job_link()->LocalStop(report);
    boost::asio::post(io_, [this, incarnation] {
      if (cluster_ && incarnation == incarnation_)
        cluster_->job_link()->AttemptDrained(false, AttemptReport{});
    });
  });
}

void SimNode::Kill() {
  StopRanks();
  running_ = false;
  ++incarnation_;
  cluster_.reset();  // the agent and its link: the connections close at once
}

}  // namespace gculaunch::bench
