#include "launcher/run/standby_pool.h"

#include <sched.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace gculaunch {
namespace {

RankLaunch Launch(std::vector<std::string> env) {
  RankLaunch l;
  l.local_rank = 1;
  l.program = "/usr/bin/python3";
  l.argv = {"/usr/bin/python3", "-u", "train.py", "--lr", "0.1"};
  l.env = std::move(env);
  l.cpus = {2, 3};
  return l;
}

const std::vector<std::string> kAttempt0 = {
    "PATH=/usr/bin",     "OMP_NUM_THREADS=2",
    "LOCAL_RANK=1",      "RANK=1",
    "WORLD_SIZE=2",      "MASTER_ADDR=127.0.0.1",
    "MASTER_PORT=29500", "TORCHELASTIC_RESTART_COUNT=0",
    "PYTHONPATH=/w/lib", "TORCHELASTIC_ERROR_FILE=/p/attempt_0/1/error.json",
    "PYTHONUNBUFFERED=1"};

std::vector<std::string> Attempt1() {
  std::vector<std::string> env = kAttempt0;
  for (std::string& item : env) {
    if (item == "TORCHELASTIC_RESTART_COUNT=0") item = "TORCHELASTIC_RESTART_COUNT=1";
    if (item.rfind("TORCHELASTIC_ERROR_FILE=", 0) == 0) {
      item = "TORCHELASTIC_ERROR_FILE=/p/attempt_1/1/error.json";
    }
    if (item == "RANK=1") item = "RANK=3";  // an elastic re-form moved the rank
  }
  return env;
}

TEST_CASE("standby pool: a standby's environment has no per-attempt value and loads the hook",
          "[standby_pool]") {
  StandbySettings settings{
      {"torch", "torch.distributed"}, "/p/warm-standby", "/p/standbys", "4242"};
  const std::vector<std::string> env =
      StandbyEnvironment(kAttempt0, settings, "/p/standbys/standby-1-1");
  CHECK(env == std::vector<std::string>{"PATH=/usr/bin", "OMP_NUM_THREADS=2", "LOCAL_RANK=1",
                                        "PYTHONUNBUFFERED=1", "PYTHONPATH=/p/warm-standby:/w/lib",
                                        "GCULAUNCH_STANDBY_PARENT=4242",
                                        "GCULAUNCH_STANDBY_DIR=/p/warm-standby",
                                        "GCULAUNCH_STANDBY_PRELOAD=torch,torch.distributed",
                                        "GCULAUNCH_STANDBY_READY=/p/standbys/standby-1-1"});
  // Without a PYTHONPATH of its own the hook's directory is all of it.
  const std::vector<std::string> bare = StandbyEnvironment({"PATH=/usr/bin"}, settings, "/r");
  CHECK(bare[1] == "PYTHONPATH=/p/warm-standby");
}

TEST_CASE("standby pool: a standby serves only a rank that differs in per-attempt values",
          "[standby_pool]") {
  const RankLaunch before = Launch(kAttempt0);
  CHECK(WhyNotWarm(before, Launch(Attempt1())) == "");

  RankLaunch other_args = Launch(Attempt1());
  other_args.argv.back() = "0.2";
  CHECK(WhyNotWarm(before, other_args) == "its command line changed");

  RankLaunch other_cpus = Launch(Attempt1());
  other_cpus.cpus = {4, 5};
  CHECK(WhyNotWarm(before, other_cpus) == "its CPUs changed");

  // Read while the preload imports (the OpenMP runtime): a change means a cold start.
  std::vector<std::string> omp = Attempt1();
  omp[1] = "OMP_NUM_THREADS=4";
  omp.push_back("TORCH_DISTRIBUTED_DEBUG=DETAIL");
  CHECK(WhyNotWarm(before, Launch(omp)) ==
        "its environment changed where a standby cannot follow (OMP_NUM_THREADS, "
        "TORCH_DISTRIBUTED_DEBUG)");
  // A variable gone counts as a change too.
  std::vector<std::string> fewer = Attempt1();
  fewer.erase(fewer.begin());
  CHECK(WhyNotWarm(before, Launch(fewer)) ==
        "its environment changed where a standby cannot follow (PATH)");
}

TEST_CASE("standby pool: no standby where the interpreter would not load the hook",
          "[standby_pool]") {
  CHECK(WhyNoHook({"/usr/bin/python3", "-u", "train.py", "-E"}) == "");
  CHECK(WhyNoHook({"/usr/bin/python3", "-u", "-m", "pkg.train", "-I"}) == "");
  CHECK(WhyNoHook({"/usr/bin/python3", "-uE", "train.py"}) ==
        "the interpreter runs with -E, which keeps gculaunch's hook from loading");
  CHECK(WhyNoHook({"/usr/bin/python3", "-I", "-u", "train.py"}) ==
        "the interpreter runs with -I, which keeps gculaunch's hook from loading");
  CHECK(WhyNoHook({"/usr/bin/python3", "-S", "train.py"}) ==
        "the interpreter runs with -S, which keeps gculaunch's hook from loading");
}

TEST_CASE("standby pool: a standby that is stopped, traced or gone cannot take its go",
          "[standby_pool]") {
  CHECK(WhyCannotGo(sys::TaskStatus{'S', 0}) == "");
  CHECK(WhyCannotGo(sys::TaskStatus{'R', 0}) == "");
  CHECK(WhyCannotGo(sys::TaskStatus{'D', 0}) == "");  // a disk wait ends by itself
  CHECK(WhyCannotGo(sys::TaskStatus{'T', 0}) ==
        "its standby is stopped (state T: SIGSTOP or a job-control stop)");
  CHECK(WhyCannotGo(sys::TaskStatus{'t', 31}) == "its standby is stopped by a tracer (state t)");
  CHECK(WhyCannotGo(sys::TaskStatus{'S', 31}) == "its standby is traced by pid 31");
  CHECK(WhyCannotGo(sys::TaskStatus{'Z', 0}) == "its standby exited");
  CHECK(WhyCannotGo(sys::TaskStatus{'X', 0}) == "its standby exited");
}

TEST_CASE("standby pool: standbys wait at nice +10, idle until the ranks are past their start",
          "[standby_pool]") {
  const sys::Priority base{2, SCHED_OTHER};
  CHECK(WaitingPriority(base, false) == sys::Priority{12, SCHED_IDLE});
  CHECK(WaitingPriority(base, true) == sys::Priority{12, SCHED_OTHER});
  CHECK(WaitingPriority(sys::Priority{0, SCHED_BATCH}, true) == sys::Priority{10, SCHED_BATCH});
  // The bound a standby has to confirm its go: "a few hundred milliseconds".
  CHECK(GoConfirmBound() >= std::chrono::milliseconds(100));
  CHECK(GoConfirmBound() <= std::chrono::milliseconds(1000));
}

}  // namespace
}  // namespace gculaunch
