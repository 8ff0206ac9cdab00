// ReportMembers: node 0's JobEvents about the job's nodes (launcher/run/job_events.h), read off the
// coordinator's state before and after one step of job::CoordinatorStep (coordinator_policy.h).
//
//   a node rank that was no member and is one now      -> node_join  (host, address)
//   a member that was present and is away now          -> node_loss  (why: its stop marker)
//   a member that was away and is present now          -> node_return (address)
//
// Pure apart from the call to `events`; the coordinator calls it once per step, so the
// membership rules stay in coordinator_policy.cc alone.  What it needs of the state before the
// step is a MemberFlags snapshot, which costs a job of N nodes O(N) small integers per step
// rather than a copy of every member's registration.
// Thread safety: the caller's.
#pragma once

#include <utility>
#include <vector>

#include "launcher/cluster/coordinator_policy.h"
#include "launcher/run/job_events.h"

namespace gculaunch {

/// The members of a state and whether each is away, in node order.
using MemberFlags = std::vector<std::pair<int, bool>>;
MemberFlags SnapshotMembers(const job::CoordinatorState& state);

void ReportMembers(const MemberFlags& before, const job::CoordinatorState& after,
                   JobEvents& events);

}  // namespace gculaunch
