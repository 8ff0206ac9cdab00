// A multi-node job inside one test process: a real store (rendezvous::Server on 127.0.0.1,
// port 0), node 0's Coordinator, and NodeAgents whose ranks are FakeRanks (a JobControl that
// records what the job told it and answers like the Supervisor would, asynchronously).
// Node 0 uses the in-process link, the others RemoteAgentLink over loopback, directly or
// (JobFixture::proxied) through a store proxy of their own.  Used by
// node_agent_test.cc and coordinator_test.cc.
//
// Thread safety: the test's thread only (one io_context, run with testing::RunUntil).
#pragma once

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "launcher/cluster/agent_link.h"
#include "launcher/cluster/coordinator.h"
#include "launcher/cluster/node_agent.h"
#include "launcher/cluster/store_board.h"
#include "launcher/run/rank_planner.h"
#include "rendezvous/listener.h"
#include "rendezvous/proxy.h"
#include "rendezvous/server.h"
#include "tests/support/test_util.h"

namespace gculaunch::testing {

class RecordingAttempts : public AttemptObserver {
 public:
  void BeginAttempt(int restart_count) override { attempts.push_back(restart_count); }
  std::vector<int> attempts;
};

/// A node's ranks as the job sees them.
class FakeRanks : public JobControl {
 public:
  explicit FakeRanks(boost::asio::io_context& io) : io_(io) {}
  void JobStart(int restart_count) override {
    calls.push_back("start " + std::to_string(restart_count));
    running = true;
  }
  void JobStop() override {
    calls.push_back("stop");
    if (!running) return;
    running = false;
    boost::asio::post(io_, [this] {
      if (agent != nullptr) agent->AttemptDrained(false, {});
    });
  }
  void JobExit(int code) override {
    calls.push_back("exit " + std::to_string(code));
    boost::asio::post(io_, [this, code] {
      if (agent != nullptr) agent->Finished(code);
    });
  }
  /// A local rank fails: the teardown is reported, then the drain.
  void Fail(int rank, int code) {
    running = false;
    LocalStopReport report;
    report.cause = StopCause::kRankFailed;
    report.rank = rank;
    report.local_rank = 0;
    report.exit_code = code;
    report.what = "exit code " + std::to_string(code);
    boost::asio::post(io_, [this, report] {
      if (agent == nullptr) return;
      agent->LocalStop(report);
      boost::asio::post(io_, [this] {
        if (agent != nullptr) agent->AttemptDrained(false, {});
      });
    });
  }
  /// Every local rank exited 0.
  void Succeed() {
    running = false;
    boost::asio::post(io_, [this] {
      if (agent != nullptr) agent->AttemptDrained(true, {});
    });
  }
  bool Called(const std::string& call) const {
    for (const auto& c : calls) {
      if (c == call) return true;
    }
    return false;
  }

  NodeAgent* agent = nullptr;
  std::vector<std::string> calls;
  bool running = false;

 private:
  boost::asio::io_context& io_;
};

struct JobFixture {
  explicit JobFixture(int node_count, int restarts = 1)
      : nnodes(node_count),
        max_restarts(restarts),
        log_sink(std::make_shared<spdlog::sinks::ostream_sink_st>(log_text)),
        log("test", log_sink) {
    log_sink->set_pattern("%l: %v");
    auto socket = rendezvous::ListenSocket::Bind("127.0.0.1", 0);
    REQUIRE(socket.ok());
    server.emplace(io, std::move(*socket), ConnectionHooks::Options(hooks), log);
    settings.config.nnodes = node_count;
    settings.config.max_restarts = restarts;
    settings.config.node0 = Registration(0, 1);
    settings.config.rdzv_timeout_s = 60;
    settings.rdzv_timeout = std::chrono::seconds(60);
    settings.heartbeat_check = std::chrono::milliseconds(20);
    settings.silence = job::SilenceRule::ForNodeTimeout(std::chrono::milliseconds(1000));
  }

  job::NodeRegistration Registration(int node, int nproc) const {
    job::NodeRegistration r;
    r.node_rank = node;
    r.nnodes = nnodes;
    r.nproc = nproc;
    r.max_restarts = max_restarts;
    r.run_id = run_id;
    r.host = "h" + std::to_string(node);
    r.pid = 1000 + node;
    r.incarnation = "inc" + std::to_string(node);
    r.node_plans = true;
    return r;
  }

  void StartCoordinator() {
    board.emplace(*server, attempts, nnodes);
    hooks->target = &*board;
    coordinator.emplace(io, *board, settings, log);
    coordinator->Start();
  }

  struct Node {
    /// --store-proxy: the node's store proxy, which carries its agent's connections too
    /// (declared first: the link uses it until the link is gone).
    std::unique_ptr<rendezvous::Proxy> proxy;
    std::unique_ptr<LaunchSpec> spec;
    std::unique_ptr<RankPlanner> planner;
    std::unique_ptr<AgentLink> link;
    RemoteAgentLink* remote = nullptr;  ///< the same object as `link` on nodes > 0
    std::unique_ptr<StoreAgentBoard> board;
    std::unique_ptr<FakeRanks> ranks;
    std::unique_ptr<NodeAgent> agent;
  };

  /// Adds node `node` with `nproc` ranks and starts its agent.
  Node& AddNode(int node, int nproc, int registered_as = -1) {
    Node n;
    n.spec = std::make_unique<LaunchSpec>();
    n.spec->nnodes = nnodes;
    n.spec->node_rank = node;
    n.spec->nproc_per_node = nproc;
    n.spec->executable = "/bin/true";
    n.spec->argv = {"/bin/true"};
    RankRuntime runtime{"0", "r", dir.File("node" + std::to_string(node))};
    n.planner = std::make_unique<RankPlanner>(*n.spec, base, runtime, false);
    NodeAgentSettings s;
    s.config.node_rank = registered_as >= 0 ? registered_as : node;
    s.config.max_restarts = max_restarts;
    s.config.node0_name = "127.0.0.1";
    s.registration = Registration(s.config.node_rank, nproc);
    s.registration.pid = 1000 + node;  // a node claiming another's rank differs in pid
    s.registration.incarnation = "inc" + std::to_string(node) + "." + std::to_string(nodes.size());
    s.registration.node_plans = older.count(node) == 0;
    s.config.rdzv_timeout_s = 60;
    s.rdzv_timeout = std::chrono::seconds(60);
    s.is_node0 = node == 0;
    s.master_addr = "127.0.0.1";
    s.agent_port = server->port();
    s.ranks_port = std::to_string(server->port());
    s.progress_period = std::chrono::milliseconds(50);
    RemoteAgentLink* remote = nullptr;
    if (node == 0) {
      n.link = std::make_unique<LocalAgentLink>(io, *server);
    } else {
      RemoteLinkOptions o;
      o.host = "127.0.0.1";
      o.port = server->port();
      o.initial_backoff = std::chrono::milliseconds(10);
      o.max_backoff = std::chrono::milliseconds(20);
      o.heartbeat_interval = std::chrono::milliseconds(20);
      if (proxied.count(node) != 0) {
        auto listener = rendezvous::ListenSocket::Bind("127.0.0.1", 0);
        REQUIRE(listener.ok());
        rendezvous::ProxyOptions p;
        p.upstream_host = "127.0.0.1";
        p.upstream_port = server->port();
        p.connect_timeout = std::chrono::seconds(10);
        n.proxy = std::make_unique<rendezvous::Proxy>(io, std::move(*listener), p, log);
        o.proxy = n.proxy.get();
      }
      auto link = std::make_unique<RemoteAgentLink>(io, o, log);
      remote = link.get();
      n.link = std::move(link);
    }
    n.remote = remote;
    n.ranks = std::make_unique<FakeRanks>(io);
    n.board = std::make_unique<StoreAgentBoard>(*n.link, remote, s.config.node_rank);
    n.agent = std::make_unique<NodeAgent>(io, *n.board, *n.planner, s, log);
    n.ranks->agent = n.agent.get();
    n.agent->Attach(*n.ranks);
    n.agent->Start();
    nodes.push_back(std::move(n));
    return nodes.back();
  }

  /// Node `i`'s gculaunch dies: its agent is gone at once, then the kernel closes its
  /// connections.
  void Kill(int i) {
    nodes[i].ranks->agent = nullptr;
    nodes[i].agent.reset();
    nodes[i].link->Close();
    nodes[i].proxy.reset();
  }

  /// The environment rank `local_rank` of node `i` would get in attempt `restart_count`.
  std::map<std::string, std::string> RankEnv(int i, int restart_count, int local_rank) {
    auto plan = nodes[i].planner->PlanAttempt(restart_count);
    REQUIRE(plan.ok());
    std::map<std::string, std::string> env;
    for (const std::string& kv : (*plan)[local_rank].env) {
      const auto eq = kv.find('=');
      env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    return env;
  }

  bool Run(const std::function<bool()>& done,
           std::chrono::seconds limit = std::chrono::seconds(60)) {
    return RunUntil(io, done, limit);
  }

  int nnodes;
  int max_restarts;
  std::string run_id = "r";  ///< the job identity the next AddNode registers
  /// Nodes that register as a gculaunch before per-node plans (they read the whole plan).
  std::set<int> older;
  /// Nodes that run --store-proxy: their agent reaches node 0 through their proxy.
  std::set<int> proxied;
  TempDir dir;
  EnvMap base;
  boost::asio::io_context io;
  std::ostringstream log_text;
  std::shared_ptr<spdlog::sinks::ostream_sink_st> log_sink;
  spdlog::logger log;
  std::shared_ptr<ConnectionHooks> hooks = std::make_shared<ConnectionHooks>();
  std::optional<rendezvous::Server> server;
  RecordingAttempts attempts;
  CoordinatorSettings settings;
  std::optional<StoreCoordinatorBoard> board;
  std::optional<Coordinator> coordinator;
  std::vector<Node> nodes;
};

}  // namespace gculaunch::testing
