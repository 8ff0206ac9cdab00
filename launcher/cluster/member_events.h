// ReportMembers: node 0's JobEvents about the job's nodes (launcher/run/job_events.h), read off the
// members one step of job::CoordinatorStep (coordinator_policy.h) changed.
//
//   a node rank that was no member and is one now      -> node_join  (host, address)
//   a member that was present and is away now          -> node_loss  (why: its stop marker)
//   a member that was away and is present now          -> node_return (address)
//
// Pure apart from the call to `events`; the coordinator calls it once per step, so the
// membership rules stay in coordinator_policy.cc alone.  It looks only at the members the step
// named (CoordinatorState::roster), against what it saw of them before (MemberFlags), so a
// step costs a job of N nodes O(changed log N), not O(N).
// Thread safety: the caller's.
#pragma once

#include <map>
#include <vector>

#include "launcher/cluster/coordinator_policy.h"
#include "launcher/run/job_events.h"

namespace gculaunch {

/// The members seen so far and whether each is away.
using MemberFlags = std::map<int, bool>;

/// Reports what changed for the members in `changed` (node ids; sorted, no repeats) between
/// `seen` and `after`, and brings `seen` up to date for them.
void ReportMembers(const std::vector<int>& changed, const job::CoordinatorState& after,
                   MemberFlags& seen, JobEvents& events);

}  // namespace gculaunch
