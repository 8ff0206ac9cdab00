// What the agent's and the coordinator's policy tables share: a stop marker as node 0 writes
// it (tests/launcher/cluster/agent_policy_test.cc, coordinator_policy_test.cc).
#pragma once

#include <string>

#include "launcher/cluster/job_protocol.h"

namespace gculaunch::job {

/// The marker of `kind` for `epoch` from `node`; a failed rank is global rank 2, local rank 0,
/// with exit code `code`.
inline StopMarker MarkerForTest(StopMarker::Kind kind, int epoch, int node, int code = 0) {
  StopMarker m;
  m.kind = kind;
  m.epoch = epoch;
  m.node = node;
  m.exit_code = code;
  m.restartable = kind == StopMarker::Kind::kRankFailed || kind == StopMarker::Kind::kNodeLost ||
                  kind == StopMarker::Kind::kNodeLeft;
  if (kind == StopMarker::Kind::kRankFailed) {
    m.rank = 2;
    m.local_rank = 0;
    m.what = "exit code " + std::to_string(code);
  }
  return m;
}

}  // namespace gculaunch::job
