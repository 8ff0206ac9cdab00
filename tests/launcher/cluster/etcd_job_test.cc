// The job protocol on etcd (launcher/cluster/etcd/etcd_board.h, etcd_seat.h) as a launch runs it:
// one EtcdClusterNode (etcd_cluster_node.h: member, seat, board, agent) per "process" with
// FakeRanks, all in this test's io_context, against Debian's etcd (tests/support/etcd_server.h)
// with a 2 s lease.  The last cases test the node's lease grant: back-off while etcd cannot be
// reached, and the join's failure after --rdzv-timeout.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <catch2/catch.hpp>
#include <cstdlib>

#include "base/exit_codes.h"
#include "launcher/cluster/etcd/etcd_board.h"
#include "launcher/cluster/etcd/etcd_cluster_node.h"
#include "launcher/cluster/etcd/etcd_seat.h"
#include "tests/launcher/cluster/job_fixture.h"
#include "tests/support/etcd_server.h"

// GCC 12 reports a false -Wmismatched-new-delete where Asio's awaitable frames are inlined.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace gculaunch::testing {
namespace {

namespace asio = boost::asio;

etcd::ClientOptions Options(const EtcdServer& server) {
  etcd::ClientOptions options;
  options.endpoints = *etcd::ParseEndpoints(server.endpoint());
  options.connect_timeout = std::chrono::milliseconds(500);
  options.request_timeout = std::chrono::seconds(2);
  return options;
}

// One job on etcd: processes (each an EtcdClusterNode) added one by one.
struct EtcdJob {
  EtcdJob(EtcdServer& server, asio::io_context& context, spdlog::logger& logger,
          std::string job_prefix, int min, int max, int restarts = 1)
      : etcd(server),
        io(context),
        log(logger),
        prefix(std::move(job_prefix)),
        min_nodes(min),
        nnodes(max),
        max_restarts(restarts) {}

  job::NodeRegistration Registration(int i) const {
    job::NodeRegistration r;
    r.nnodes = nnodes;
    r.min_nodes = min_nodes;
    r.nproc = 1;
    r.max_restarts = max_restarts;
    r.run_id = "r";
    r.host = "h" + std::to_string(i);
    r.pid = 1000 + i;
    r.incarnation = "inc" + std::to_string(i);
    return r;
  }

  struct Proc {
    std::unique_ptr<LaunchSpec> spec;
    std::unique_ptr<RankPlanner> planner;
    std::unique_ptr<FakeRanks> ranks;
    std::unique_ptr<EtcdClusterNode> node;
  };

  /// What a launch would make of process `i`'s flags, with short test timings.
  EtcdClusterNodeSettings Settings(int i) const {
    job::NodeRegistration reg = Registration(i);
    EtcdClusterNodeSettings s;
    s.seat.coordinator.config.nnodes = nnodes;
    s.seat.coordinator.config.min_nodes = min_nodes;
    s.seat.coordinator.config.max_restarts = max_restarts;
    s.seat.coordinator.config.node0 = reg;
    s.seat.coordinator.config.rdzv_timeout_s = 60;
    s.seat.coordinator.config.elected_leader = true;
    s.seat.coordinator.rdzv_timeout = std::chrono::seconds(60);
    s.seat.coordinator.heartbeat_check = std::chrono::milliseconds(50);
    s.seat.coordinator.silence = job::SilenceRule::ForNodeTimeout(std::chrono::seconds(2));
    s.seat.coordinator.last_call = std::chrono::milliseconds(300);
    s.seat.ranks_host = "127.0.0.1";
    s.agent.config.max_restarts = max_restarts;
    s.agent.config.rdzv_timeout_s = 60;
    s.agent.config.nnodes = reg.nnodes;
    s.agent.config.min_nodes = reg.min_nodes;
    s.agent.config.elected_leader = true;
    s.agent.rdzv_timeout = std::chrono::seconds(60);
    s.agent.registration = reg;
    s.agent.ranks_port = "1";  // never used: every plan names the leader's ranks port
    s.agent.progress_period = std::chrono::milliseconds(200);
    s.identity = EtcdIdentity{reg.host, reg.pid, reg.incarnation};
    s.key_prefix = prefix;
    s.lease_ttl = std::chrono::seconds(2);
    s.local_addr = "127.0.0.1";
    s.rdzv_timeout = std::chrono::seconds(60);
    return s;
  }

  /// Process `i`, as a launch makes it (EtcdClusterNode), started with `options`.
  Proc& Add(int i, const etcd::ClientOptions& options, EtcdClusterNodeSettings settings) {
    auto p = std::make_unique<Proc>();
    p->spec = std::make_unique<LaunchSpec>();
    p->spec->nnodes = nnodes;
    p->spec->nproc_per_node = 1;
    p->spec->master_addr = "etcd-job";  // the ranks must get the leader's address instead
    p->spec->executable = "/bin/true";
    p->spec->argv = {"/bin/true"};
    RankRuntime runtime{"0", "r", dir.File("node" + std::to_string(i))};
    p->planner = std::make_unique<RankPlanner>(*p->spec, base, runtime, false);
    auto node = EtcdClusterNode::Make(io, options, std::move(settings), *p->planner, log);
    REQUIRE(node.ok());
    p->node = std::move(*node);
    p->ranks = std::make_unique<FakeRanks>(io);
    p->ranks->agent = &p->node->agent();
    p->node->Start(*p->ranks);
    procs.push_back(std::move(p));
    return *procs.back();
  }

  Proc& Add(int i) { return Add(i, Options(etcd), Settings(i)); }

  /// Process `i` is killed: nothing is revoked, its lease ends after the TTL.
  void Kill(int i) {
    Proc& p = *procs[i];
    p.ranks->agent = nullptr;
    p.node.reset();
  }

  bool Alive(int i) const { return procs[i]->node != nullptr; }

  int Leader() const {
    for (std::size_t i = 0; i < procs.size(); ++i) {
      if (Alive(static_cast<int>(i)) && procs[i]->node->seat().leader()) return static_cast<int>(i);
    }
    return -1;
  }

  /// Every live process's ranks were started in `epoch`.
  bool AllStarted(int epoch) const {
    for (std::size_t i = 0; i < procs.size(); ++i) {
      if (Alive(static_cast<int>(i)) && !procs[i]->ranks->Called("start " + std::to_string(epoch)))
        return false;
    }
    return true;
  }

  void SucceedAll() {
    for (std::size_t i = 0; i < procs.size(); ++i) {
      if (Alive(static_cast<int>(i))) procs[i]->ranks->Succeed();
    }
  }

  /// Every live agent finished; their seats stop campaigning.
  bool AllFinished() {
    for (std::size_t i = 0; i < procs.size(); ++i) {
      if (!Alive(static_cast<int>(i))) continue;
      if (!procs[i]->node->agent().finished()) return false;
      procs[i]->node->seat().Stop();
    }
    return true;
  }

  std::map<std::string, std::string> RankEnv(int i, int restart_count) {
    auto plan = procs[i]->planner->PlanAttempt(restart_count);
    REQUIRE(plan.ok());
    std::map<std::string, std::string> env;
    for (const std::string& kv : (*plan)[0].env) {
      const auto eq = kv.find('=');
      env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    return env;
  }

  EtcdServer& etcd;
  asio::io_context& io;
  spdlog::logger& log;
  std::string prefix;
  int min_nodes;
  int nnodes;
  int max_restarts;
  TempDir dir;
  EnvMap base;
  std::vector<std::unique_ptr<Proc>> procs;
};

struct Fixture {
  Fixture()
      : log_sink(std::make_shared<spdlog::sinks::ostream_sink_st>(log_text)),
        log("test", log_sink) {
    log_sink->set_pattern("%l: %v");
  }

  /// The keys under `prefix` in etcd, read by a client of the test's own.
  std::vector<std::string> Keys(const std::string& prefix) {
    auto client = std::make_shared<etcd::Client>(io.get_executor(), Options(server));
    std::optional<Result<etcd::RangeResponse>> got;
    asio::co_spawn(
        io,
        [client, prefix, &got]() -> asio::awaitable<void> {
          auto r = co_await client->GetPrefix(prefix);
          got.emplace(std::move(r));
        },
        asio::detached);
    REQUIRE(RunUntil(
        io, [&] { return got.has_value(); }, std::chrono::seconds(10)));
    REQUIRE(got->ok());
    std::vector<std::string> keys;
    for (const auto& kv : (*got)->kvs) keys.push_back(kv.key);
    return keys;
  }

  // A bound for what must happen, not a timing assertion: three etcd members, their leases and
  // elections on a 2-core machine beside two busy loops took over 20 s once (the first start of
  // "the leader dies and a fixed-size job waits"), so the bound is the job fixture's 60 s.
  bool Run(const std::function<bool()>& done, int seconds = 60) {
    return RunUntil(io, done, std::chrono::seconds(seconds));
  }

  EtcdServer server;
  asio::io_context io;
  std::ostringstream log_text;
  std::shared_ptr<spdlog::sinks::ostream_sink_st> log_sink;
  spdlog::logger log;
};

TEST_CASE("etcd job: three nodes of a fixed size run epoch 0 and remove their keys", "[etcd_job]") {
  Fixture f;
  EtcdJob job(f.server, f.io, f.log, "/gculaunch/job1/", 3, 3);
  for (int i = 0; i < 3; ++i) job.Add(i);
  REQUIRE(f.Run([&] { return job.AllStarted(0); }));
  const int leader = job.Leader();
  REQUIRE(leader >= 0);
  CHECK(job.procs[leader]->node->seat().term() == 1);
  const std::string port =
      std::to_string(job.procs[leader]->node->seat().ranks_store()->server().port());
  std::set<std::string> ranks;
  for (int i = 0; i < 3; ++i) {
    auto env = job.RankEnv(i, 0);
    CHECK(env["WORLD_SIZE"] == "3");
    CHECK(env["MASTER_ADDR"] == "127.0.0.1");
    CHECK(env["MASTER_PORT"] == port);
    ranks.insert(env["RANK"]);
  }
  CHECK(ranks == std::set<std::string>{"0", "1", "2"});
  CHECK(job.RankEnv(leader, 0)["RANK"] == "0");  // the leader is node rank 0
  job.SucceedAll();
  REQUIRE(f.Run([&] { return job.AllFinished(); }));
  for (int i = 0; i < 3; ++i) CHECK(job.procs[i]->node->agent().exit_code() == 0);
  REQUIRE(f.Run([&] { return job.procs[leader]->node->seat().finished(); }));
  CHECK(f.Keys("/gculaunch/job1/").empty());
  if (std::getenv("ETCD_JOB_LOG") != nullptr) WARN(f.log_text.str());
}

TEST_CASE("etcd job: a rank failure on another node restarts every node once", "[etcd_job]") {
  Fixture f;
  EtcdJob job(f.server, f.io, f.log, "/gculaunch/job2/", 3, 3);
  for (int i = 0; i < 3; ++i) job.Add(i);
  REQUIRE(f.Run([&] { return job.AllStarted(0); }));
  const int other = (job.Leader() + 1) % 3;
  job.procs[other]->ranks->Fail(0, 7);
  REQUIRE(f.Run([&] { return job.AllStarted(1); }));
  for (int i = 0; i < 3; ++i) CHECK(job.RankEnv(i, 1)["TORCHELASTIC_RESTART_COUNT"] == "1");
  job.SucceedAll();
  REQUIRE(f.Run([&] { return job.AllFinished(); }));
  for (int i = 0; i < 3; ++i) {
    CHECK(job.procs[i]->node->agent().exit_code() == 0);
    CHECK_FALSE(job.procs[i]->ranks->Called("start 2"));
  }
  if (std::getenv("ETCD_JOB_LOG") != nullptr) WARN(f.log_text.str());
}

TEST_CASE("etcd job: the leader dies and an elastic job continues on two nodes under a new leader",
          "[etcd_job]") {
  Fixture f;
  EtcdJob job(f.server, f.io, f.log, "/gculaunch/job3/", 2, 3);
  for (int i = 0; i < 3; ++i) job.Add(i);
  REQUIRE(f.Run([&] { return job.AllStarted(0); }));
  const int old = job.Leader();
  job.Kill(old);
  REQUIRE(f.Run([&] { return job.AllStarted(1); }));
  const int leader = job.Leader();
  REQUIRE(leader >= 0);
  CHECK(job.procs[leader]->node->seat().term() == 2);
  for (int i = 0; i < 3; ++i) {
    if (i == old) continue;
    auto env = job.RankEnv(i, 1);
    CHECK(env["WORLD_SIZE"] == "2");
    CHECK(env["MASTER_PORT"] ==
          std::to_string(job.procs[leader]->node->seat().ranks_store()->server().port()));
  }
  job.SucceedAll();
  REQUIRE(f.Run([&] { return job.AllFinished(); }));
  for (int i = 0; i < 3; ++i) {
    if (i != old) CHECK(job.procs[i]->node->agent().exit_code() == 0);
  }
  // The lines say what happened on etcd: the old leader's key went with its lease, and a
  // survivor took over (not "node 0 came back").
  CHECK_THAT(f.log_text.str(),
             Catch::Contains("(h" + std::to_string(old) + ", pid " + std::to_string(1000 + old) +
                             ") went away: its etcd key /gculaunch/job3/leader "
                             "was deleted (its lease ended)"));
  CHECK_THAT(f.log_text.str(),
             Catch::Contains("(its lease ended); this node stops its ranks and joins the job "
                             "again under the next leader (at most 60 s, --rdzv-timeout; restart "
                             "1 of 1)"));
  CHECK_THAT(f.log_text.str(),
             Catch::Contains("this node took over as the job's leader: resuming the job at epoch "
                             "1 (the nodes ran epoch 0 under the previous leader)"));
  CHECK_THAT(f.log_text.str(), !Catch::Contains("came back"));
  if (std::getenv("ETCD_JOB_LOG") != nullptr) WARN(f.log_text.str());
}

TEST_CASE("etcd job: a node that does not lead dies: its lease ends and the job goes on without it",
          "[etcd_job]") {
  Fixture f;
  EtcdJob job(f.server, f.io, f.log, "/gculaunch/job7/", 2, 3);
  for (int i = 0; i < 3; ++i) job.Add(i);
  REQUIRE(f.Run([&] { return job.AllStarted(0); }));
  const int leader = job.Leader();
  const int other = (leader + 1) % 3;
  job.Kill(other);
  REQUIRE(f.Run([&] { return job.AllStarted(1); }));
  CHECK(job.Leader() == leader);  // the same term: nobody campaigned again
  CHECK(job.procs[leader]->node->seat().term() == 1);
  CHECK(job.RankEnv(leader, 1)["WORLD_SIZE"] == "2");
  CHECK_THAT(f.log_text.str(),
             Catch::Contains("was lost: its etcd lease ended without a bye (killed, or cut off "
                             "from etcd); the job re-forms without it if 2 node(s) remain"));
  job.SucceedAll();
  REQUIRE(f.Run([&] { return job.AllFinished(); }));
  for (int i = 0; i < 3; ++i) {
    if (i != other) CHECK(job.procs[i]->node->agent().exit_code() == 0);
  }
  if (std::getenv("ETCD_JOB_LOG") != nullptr) WARN(f.log_text.str());
}

TEST_CASE(
    "etcd job: a node that does not lead dies in a fixed-size job: a replacement takes its "
    "place",
    "[etcd_job]") {
  Fixture f;
  EtcdJob job(f.server, f.io, f.log, "/gculaunch/job8/", 3, 3);
  for (int i = 0; i < 3; ++i) job.Add(i);
  REQUIRE(f.Run([&] { return job.AllStarted(0); }));
  const int leader = job.Leader();
  const int other = (leader + 1) % 3;
  job.Kill(other);
  REQUIRE(f.Run([&] {
    return f.log_text.str().find(
               "every node stops its ranks and waits up to 60 s for it or a "
               "replacement to join") != std::string::npos;
  }));
  f.Run([] { return false; }, 1);
  for (int i = 0; i < 3; ++i) {
    if (i != other) CHECK_FALSE(job.procs[i]->ranks->Called("start 1"));  // not on two nodes
  }
  job.Add(3);
  REQUIRE(f.Run([&] { return job.AllStarted(1); }));
  CHECK(job.Leader() == leader);
  CHECK(job.RankEnv(3, 1)["WORLD_SIZE"] == "3");
  job.SucceedAll();
  REQUIRE(f.Run([&] { return job.AllFinished(); }));
  for (int i = 0; i < 4; ++i) {
    if (i != other) CHECK(job.procs[i]->node->agent().exit_code() == 0);
  }
  if (std::getenv("ETCD_JOB_LOG") != nullptr) WARN(f.log_text.str());
}

TEST_CASE("etcd job: the leader dies and a fixed-size job waits for a replacement node",
          "[etcd_job]") {
  Fixture f;
  EtcdJob job(f.server, f.io, f.log, "/gculaunch/job4/", 3, 3);
  for (int i = 0; i < 3; ++i) job.Add(i);
  REQUIRE(f.Run([&] { return job.AllStarted(0); }));
  const int old = job.Leader();
  job.Kill(old);
  // The survivors elect a new leader and wait: nobody starts epoch 1 with two nodes.
  REQUIRE(f.Run([&] {
    const int l = job.Leader();
    return l >= 0 && job.procs[l]->node->seat().term() == 2 &&
           job.procs[l]->node->seat().coordinator() &&
           job.procs[l]->node->seat().coordinator()->state().members.size() == 2;
  }));
  f.Run([] { return false; }, 1);
  for (int i = 0; i < 3; ++i) {
    if (i != old) CHECK_FALSE(job.procs[i]->ranks->Called("start 1"));
  }
  job.Add(3);  // the replacement
  REQUIRE(f.Run([&] { return job.AllStarted(1); }));
  CHECK(job.RankEnv(3, 1)["WORLD_SIZE"] == "3");
  job.SucceedAll();
  REQUIRE(f.Run([&] { return job.AllFinished(); }));
  for (int i = 0; i < 4; ++i) {
    if (i != old) CHECK(job.procs[i]->node->agent().exit_code() == 0);
  }
  if (std::getenv("ETCD_JOB_LOG") != nullptr) WARN(f.log_text.str());
}

TEST_CASE("etcd job: a deposed leader's writes are refused", "[etcd_job]") {
  Fixture f;
  const std::string prefix = "/gculaunch/job5/";
  EtcdMember old(f.io, Options(f.server), prefix, std::chrono::seconds(2),
                 EtcdIdentity{"old", 1, "old"});
  bool ready = false;
  old.Start([&](const Status& s) { ready = s.ok(); });
  REQUIRE(f.Run([&] { return ready; }));
  // The old leader of term 1, by hand.
  etcd::TxnRequest campaign;
  campaign.compare.push_back(etcd::Compare::Missing(prefix + kEtcdLeaderKey));
  campaign.success.push_back(etcd::RequestOp::Put(prefix + kEtcdLeaderKey,
                                                  EncodeLeader({1, "old", 1, "old"}), old.lease()));
  campaign.success.push_back(etcd::RequestOp::Put(prefix + kEtcdTermKey, "1"));
  std::int64_t guard = 0;
  old.RunTxn(campaign, [&](Result<etcd::TxnResponse> r) {
    REQUIRE(r.ok());
    REQUIRE(r->succeeded);
    guard = r->revision;
  });
  REQUIRE(f.Run([&] { return guard != 0; }));
  RecordingAttempts attempts;
  EtcdCoordinatorBoard board(old, 1, guard, attempts);
  bool listed = false;
  board.Start([&](const Status& s) { listed = s.ok(); });
  REQUIRE(f.Run([&] { return listed; }));
  board.PublishPlan(0, "plan 0");
  REQUIRE(f.Run([&] { return f.Keys(prefix + "t/1/job/plan/0").size() == 1; }));

  // Its leader key goes; another process wins term 2.
  bool deleted = false;
  old.DeletePrefix(prefix + kEtcdLeaderKey, [&](const Status& s) { deleted = s.ok(); });
  REQUIRE(f.Run([&] { return deleted; }));
  EtcdJob job(f.server, f.io, f.log, prefix, 1, 1);
  job.Add(0);
  REQUIRE(f.Run([&] { return job.Leader() == 0 && job.procs[0]->node->seat().term() == 2; }));

  std::string why;
  board.OnDeposed([&](std::string what) { why = std::move(what); });
  board.PublishPlan(1, "plan 1");
  board.SetMissing("from the old leader");
  REQUIRE(f.Run([&] { return board.deposed() && !why.empty(); }));
  CHECK(f.Keys(prefix + "t/1/job/plan/1").empty());
  CHECK(f.Keys(prefix + "t/1/job/missing").empty());
  CHECK(why.find("another term") != std::string::npos);
  if (std::getenv("ETCD_JOB_LOG") != nullptr) WARN(f.log_text.str());
}

TEST_CASE("etcd job: two jobs with different prefixes on one etcd do not meet", "[etcd_job]") {
  Fixture f;
  EtcdJob a(f.server, f.io, f.log, "/gculaunch/a/", 2, 2);
  EtcdJob b(f.server, f.io, f.log, "/gculaunch/b/", 2, 2);
  for (int i = 0; i < 2; ++i) {
    a.Add(i);
    b.Add(10 + i);
  }
  REQUIRE(f.Run([&] { return a.AllStarted(0) && b.AllStarted(0); }));
  for (EtcdJob* job : {&a, &b}) {
    const int leader = job->Leader();
    REQUIRE(leader >= 0);
    CHECK(job->procs[leader]->node->seat().term() == 1);
    for (int i = 0; i < 2; ++i) CHECK(job->RankEnv(i, 0)["WORLD_SIZE"] == "2");
  }
  a.SucceedAll();
  b.SucceedAll();
  REQUIRE(f.Run([&] { return a.AllFinished() && b.AllFinished(); }));
  if (std::getenv("ETCD_JOB_LOG") != nullptr) WARN(f.log_text.str());
}

TEST_CASE("etcd cluster node: while etcd is down the lease grant backs off, once up it joins",
          "[etcd_job]") {
  Fixture f;
  f.server.Stop();
  EtcdJob job(f.server, f.io, f.log, "/gculaunch/late/", 1, 1);
  EtcdClusterNodeSettings settings = job.Settings(0);
  settings.progress_period = std::chrono::milliseconds(500);
  EtcdJob::Proc& p = job.Add(0, Options(f.server), std::move(settings));
  // 100 ms doubling to 1 s: about five attempts in 1.5 s, not one per request timeout.
  f.Run([] { return false; }, 2);
  CHECK(p.node->grant_attempts() >= 3);
  CHECK(p.node->grant_attempts() <= 8);
  CHECK(p.ranks->calls.empty());
  CHECK(f.log_text.str().find("waiting for etcd at " + f.server.endpoint()) != std::string::npos);
  f.server.Start();
  REQUIRE(f.Run([&] { return p.ranks->Called("start 0"); }));
  CHECK(f.log_text.str().find("reached etcd at " + f.server.endpoint()) != std::string::npos);
  CHECK(p.node->seat().term() == 1);
  job.SucceedAll();
  REQUIRE(f.Run([&] { return job.AllFinished(); }));
  CHECK(p.node->agent().exit_code() == 0);
  if (std::getenv("ETCD_JOB_LOG") != nullptr) WARN(f.log_text.str());
}

TEST_CASE("etcd cluster node: etcd never answers: the join fails after --rdzv-timeout (exit 3)",
          "[etcd_job]") {
  Fixture f;
  f.server.Stop();
  EtcdJob job(f.server, f.io, f.log, "/gculaunch/never/", 1, 1);
  EtcdClusterNodeSettings settings = job.Settings(0);
  settings.rdzv_timeout = std::chrono::milliseconds(1500);
  const auto start = std::chrono::steady_clock::now();
  EtcdJob::Proc& p = job.Add(0, Options(f.server), std::move(settings));
  const std::string exit = "exit " + std::to_string(exit_code::kRendezvousFailed);
  REQUIRE(f.Run([&] { return p.ranks->Called(exit); }));
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= std::chrono::milliseconds(1500));
  CHECK(waited < std::chrono::seconds(10));
  REQUIRE(p.node->agent().join_error().has_value());
  const Error& error = *p.node->agent().join_error();
  CHECK(error.what.find("could not reach etcd at " + f.server.endpoint() + " after ") == 0);
  CHECK(error.what.find("(--rdzv-timeout 1.5 s)") != std::string::npos);
  CHECK(error.hint.find("raise --rdzv-timeout if etcd starts later") != std::string::npos);
  CHECK(p.node->grant_attempts() >= 3);
}

}  // namespace
}  // namespace gculaunch::testing
