// MakeClusterNodeSettings (launcher/cluster/cluster_settings.h): what a launch's spec makes of
// the node's link to node 0, here the heartbeat that grows with the job.
#include "launcher/cluster/cluster_settings.h"

#include <catch2/catch.hpp>
#include <chrono>

namespace gculaunch {
namespace {

using std::chrono::milliseconds;

LaunchSpec Spec(int nnodes, double node_timeout_s) {
  LaunchSpec spec;
  spec.nnodes = nnodes;
  spec.nproc_per_node = 8;
  spec.node_rank = 1;
  spec.master_addr = "node0";
  spec.master_port = 29500;
  spec.agent_port = 29500;
  spec.node_timeout_s = node_timeout_s;
  return spec;
}

TEST_CASE("cluster settings: a node beats every second, less often in a job of thousands",
          "[cluster_settings]") {
  const RankRuntime runtime;
  CHECK(MakeClusterNodeSettings(Spec(2, 30), runtime).remote.heartbeat_interval ==
        milliseconds(1000));
  CHECK(MakeClusterNodeSettings(Spec(8000, 30), runtime).remote.heartbeat_interval ==
        milliseconds(2000));
  // 16k nodes: an eighth of the default --node-timeout caps the 4.1 s that node 0's load asks.
  const auto large = MakeClusterNodeSettings(Spec(16384, 30), runtime);
  CHECK(large.remote.heartbeat_interval == milliseconds(3750));
  CHECK(large.remote.node_timeout == milliseconds(30000));
  CHECK(MakeClusterNodeSettings(Spec(16384, 5), runtime).remote.heartbeat_interval ==
        milliseconds(1000));
}

}  // namespace
}  // namespace gculaunch
