#include "launcher/sys/off_loop.h"

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/support/test_util.h"

namespace gculaunch::sys {

TEST_CASE("off loop: jobs run on another thread, results come back in order on the loop",
          "[off_loop]") {
  boost::asio::io_context io;
  OffLoop off(io);
  const auto loop_thread = std::this_thread::get_id();
  std::vector<int> results;
  std::vector<bool> on_loop;
  for (int i = 0; i < 5; ++i) {
    off.Run<std::pair<int, bool>>(
        [i, loop_thread] {
          return std::pair{i * i, std::this_thread::get_id() != loop_thread};
        },
        [&](std::pair<int, bool> r) {
          results.push_back(r.first);
          CHECK(r.second);  // the job did not run on the loop's thread
          on_loop.push_back(std::this_thread::get_id() == loop_thread);
        });
  }
  REQUIRE(testing::RunUntil(io, [&] { return results.size() == 5; }));
  CHECK(results == std::vector<int>{0, 1, 4, 9, 16});
  CHECK(on_loop == std::vector<bool>(5, true));
  CHECK(off.pending() == 0);
}

TEST_CASE("off loop: a job no longer counts as pending when its done runs", "[off_loop]") {
  // The worker used to count a job as finished only after it had posted the result, so the
  // loop could run `done` while pending() still counted that job (a full test run under load
  // saw 1 == 0 above).  Many short rounds, each `done` checking at once.
  boost::asio::io_context io;
  OffLoop off(io);
  constexpr int kJobs = 4;
  int too_many = 0;
  for (int round = 0; round < 300; ++round) {
    int done = 0;
    for (int i = 0; i < kJobs; ++i) {
      off.Run<int>([i] { return i; },
                   [&](int) {
                     ++done;
                     // Jobs after this one may still run; this one and those before may not.
                     if (off.pending() > static_cast<size_t>(kJobs - done)) ++too_many;
                   });
    }
    REQUIRE(testing::RunUntil(io, [&] { return done == kJobs; }));
    io.restart();
  }
  CHECK(too_many == 0);
  CHECK(off.pending() == 0);
}

TEST_CASE("off loop: the destructor does not wait for a stuck job, whose result is dropped",
          "[off_loop]") {
  boost::asio::io_context io;
  std::mutex mutex;
  std::condition_variable cv;
  bool started = false;
  bool release = false;
  bool finished = false;
  bool done_ran = false;
  {
    OffLoop off(io);
    off.Run<int>(
        [&] {
          std::unique_lock<std::mutex> lock(mutex);
          started = true;
          cv.notify_all();
          cv.wait(lock, [&] { return release; });  // "stuck in the kernel"
          finished = true;
          cv.notify_all();
          return 1;
        },
        [&](int) { done_ran = true; });
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return started; });
    CHECK(off.pending() == 1);
  }  // returns although the job still runs
  {
    std::unique_lock<std::mutex> lock(mutex);
    release = true;
    cv.notify_all();
    cv.wait(lock, [&] { return finished; });
  }
  // The job ended after its OffLoop was gone: its result is posted nowhere.
  io.poll();
  CHECK_FALSE(done_ran);
}

}  // namespace gculaunch::sys
