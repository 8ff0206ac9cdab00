// The collaborators a WorkerGroup (and a Supervisor over it) needs, wired for tests: a real
// spawner and child watcher, output flow control, and console output into two files of a
// temporary directory.  Ranks are tests/support/helpers/test_child runs.  Used by
// worker_group_test.cc and supervisor_test.cc.
//
// Thread safety: the test's thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "launcher/run/output_writer.h"
#include "launcher/run/worker_group.h"
#include "launcher/sys/child_watcher.h"
#include "launcher/sys/spawner.h"
#include "tests/support/test_util.h"

namespace gculaunch::testing {

struct WorkerFixture {
  explicit WorkerFixture(bool force_sigchld = false, OutputWriter::Limits limits = {})
      : watcher(io, force_sigchld), flow(io), writer(limits, flow.SpaceCallback()) {
    out = *OutputTarget::FileForTest(dir.File("console.out"));
    err = *OutputTarget::FileForTest(dir.File("console.err"));
  }

  WorkerGroupDeps Deps() {
    return WorkerGroupDeps{
        io, spawner, watcher, writer, flow, nullptr, out, err, std::chrono::milliseconds(20)};
  }

  /// Local rank `local_rank` (also its global rank) running test_child with `steps`.
  RankLaunch Rank(int local_rank, std::vector<std::string> steps) {
    RankLaunch launch;
    launch.local_rank = local_rank;
    launch.rank = local_rank;
    launch.program = TestChild();
    launch.argv = {"test_child"};
    launch.argv.insert(launch.argv.end(), steps.begin(), steps.end());
    launch.env = {"PATH=/usr/bin:/bin"};
    return launch;
  }

  /// Everything written to the console so far (waits for the writer to drain).
  std::string ConsoleOut() {
    writer.Finish(std::chrono::seconds(10));
    return ReadFile(dir.File("console.out"));
  }
  std::string ConsoleErr() {
    writer.Finish(std::chrono::seconds(10));
    return ReadFile(dir.File("console.err"));
  }

  TempDir dir;
  boost::asio::io_context io;
  sys::Spawner spawner;
  sys::ChildWatcher watcher;
  OutputFlow flow;
  OutputWriter writer;
  TargetPtr out, err;
};

}  // namespace gculaunch::testing
