#include "launcher/ops/readiness.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

namespace gculaunch {
namespace {

// A key space: what the ranks' store holds in the current attempt.
struct Keys {
  std::map<std::string, std::string> kv;
  StoreLookup Lookup() const {
    return [this](std::string_view key) -> const std::string* {
      auto it = kv.find(std::string(key));
      return it == kv.end() ? nullptr : &it->second;
    };
  }
};

// The keys the recorded gloo jobs leave (tests/traces/gloo3-agent-store-torch*.txt).
Keys Torch113(int restart, int world, int barrier_count) {
  Keys k;
  const std::string p = "//worker/attempt_" + std::to_string(restart) + "/default_pg/";
  for (int r = 0; r < world; ++r) {
    k.kv[p + "0/0/rank_" + std::to_string(r)] = "vm";
    k.kv[p + "0/0/" + std::to_string(r)] = "addr";
  }
  if (barrier_count > 0) k.kv[p + "store_based_barrier_key:1"] = std::to_string(barrier_count);
  return k;
}

Keys Torch26(int world, int ranks_set) {
  Keys k;
  for (int r = 0; r < ranks_set && r < world; ++r) {
    k.kv["/default_pg/0//cpu//0/" + std::to_string(r)] = "addr";
  }
  return k;
}

}  // namespace

TEST_CASE("readiness: the store's marks of a passed init_process_group, per torch version",
          "[readiness]") {
  // torch 1.13: the store barrier under the attempt's prefix, done at WORLD_SIZE.
  CHECK_FALSE(InitMark(Torch113(0, 3, 0).Lookup(), 0, 3));
  CHECK_FALSE(InitMark(Torch113(0, 3, 2).Lookup(), 0, 3));
  CHECK(InitMark(Torch113(0, 3, 3).Lookup(), 0, 3) ==
        "torch's store barrier after init_process_group (torch 1.13, 2.0)");
  CHECK(InitMark(Torch113(2, 3, 3).Lookup(), 2, 3));
  CHECK_FALSE(InitMark(Torch113(2, 3, 3).Lookup(), 1, 3));  // another attempt's prefix
  // torch 2.x: gloo's full mesh, one address key per rank.
  CHECK_FALSE(InitMark(Torch26(3, 2).Lookup(), 0, 3));
  CHECK(InitMark(Torch26(3, 3).Lookup(), 0, 3) ==
        "every rank's address in gloo's full mesh (torch 2.x)");
  CHECK(InitMark(Torch26(3, 3).Lookup(), 5, 3));  // no attempt prefix on 2.x
  CHECK_FALSE(InitMark(Torch26(4, 3).Lookup(), 0, 4));
  // torch 2.x with TORCH_DIST_INIT_BARRIER=1 (NCCL too): the barrier of group "0".
  Keys barrier;
  barrier.kv["/default_pg/store_based_barrier_key:0"] = "2";
  CHECK(InitMark(barrier.Lookup(), 0, 2) ==
        "torch's store barrier after init_process_group (TORCH_DIST_INIT_BARRIER=1)");
  CHECK_FALSE(InitMark(barrier.Lookup(), 0, 3));
  // torch 2.x NCCL: the first communicator's id, written by rank 0.
  Keys nccl;
  nccl.kv["/default_pg/0//cuda//0"] = "id";
  CHECK(InitMark(nccl.Lookup(), 0, 8) ==
        "the first NCCL communicator's id from rank 0 (torch 2.x)");
  // Nothing planned yet, or an empty store.
  CHECK_FALSE(InitMark(Torch26(3, 3).Lookup(), 0, 0));
  CHECK_FALSE(InitMark(Keys{}.Lookup(), 0, 1));
}

TEST_CASE("readiness: from starting through running, a restart, and the end", "[readiness]") {
  double now = 100;
  JobStatus status([&] { return now; });
  status.On(JobEvent::Launch({{"run_id", "r"}, {"nproc_per_node", 2}, {"max_restarts", 3}}));
  ReadinessInput in;
  in.job = &status.snapshot();
  in.now = now;
  auto line = [&in] { return AssessReadiness(in).Line(); };
  CHECK(line() == "not ready: the ranks are starting");
  in.multinode = true;
  CHECK(line() == "not ready: waiting for the rendezvous of the nodes");
  status.On(JobEvent::RankStart(0, 0, 0, 11));
  CHECK(line() == "not ready: 1 of 2 local ranks of epoch 0 started");
  status.On(JobEvent::RankStart(0, 1, 1, 12));
  CHECK(line() ==
        "not ready: 2 local ranks of epoch 0 running; waiting for every rank to pass "
        "init_process_group");
  in.init_mark = "every rank's address in gloo's full mesh (torch 2.x)";
  CHECK(AssessReadiness(in).ready);
  CHECK(line() ==
        "ready: 2 local ranks of epoch 0 running, every rank passed init_process_group (every "
        "rank's address in gloo's full mesh (torch 2.x))");
  // A failure: not ready at once, through the back-off, until the new ranks passed init.
  status.On(JobEvent::RankExit(0, 1, 1, 12, WorkerExit::Exited(3)));
  CHECK(line() ==
        "not ready: rank 1 of epoch 0 exited with exit code 3; its local ranks are stopping or "
        "restarting");
  status.On(JobEvent::RankExit(0, 0, 0, 11, WorkerExit::Signaled(15)));
  status.On(JobEvent::Backoff(1, 4, "rank 1 failed"));
  now = in.now = 101;
  CHECK(line() == "not ready: restarting: the next restart waits 3.0 s more (--restart-backoff)");
  JobEvent restart = JobEvent::Restart(1, 3, "rank 1 failed", 4);
  status.On(restart);
  status.On(JobEvent::RankStart(1, 0, 0, 21));
  status.On(JobEvent::RankStart(1, 1, 1, 22));
  in.init_mark.reset();
  CHECK_FALSE(AssessReadiness(in).ready);
  in.init_mark = "x";
  CHECK(AssessReadiness(in).ready);
  // Success of one rank is not "running" either.
  status.On(JobEvent::RankExit(1, 0, 0, 21, WorkerExit::Exited(0)));
  CHECK(line() ==
        "not ready: rank 0 of epoch 1 finished; its local ranks are stopping or restarting");
  status.On(JobEvent::Stop(0, Outcome::kSuccess, 0));
  CHECK(line() == "not ready: the job is over (exit code 0)");
}

TEST_CASE("readiness: where init_process_group is not visible, running ranks are ready",
          "[readiness]") {
  JobStatus status([] { return 5.0; });
  status.On(JobEvent::Launch({{"run_id", "r"}, {"nproc_per_node", 1}}));
  status.On(JobEvent::RankStart(0, 2, 0, 11));
  ReadinessInput in;
  in.job = &status.snapshot();
  in.init_unknown = "the ranks' store is on node 0";
  const Readiness r = AssessReadiness(in);
  CHECK(r.ready);
  CHECK(r.Line() ==
        "ready: 1 local rank of epoch 0 running (whether they passed init_process_group is not "
        "visible here: the ranks' store is on node 0)");
}

}  // namespace gculaunch
