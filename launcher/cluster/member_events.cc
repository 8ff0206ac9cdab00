#include "launcher/cluster/member_events.h"

namespace gculaunch {

void ReportMembers(const std::vector<int>& changed, const job::CoordinatorState& after,
                   MemberFlags& seen, JobEvents& events) {
  for (const int node : changed) {
    auto now = after.members.find(node);
    auto was = seen.find(node);
    if (now == after.members.end()) {  // removed: no event of its own (its loss came first)
      if (was != seen.end()) seen.erase(was);
      continue;
    }
    const job::Member& m = now->second;
    if (was == seen.end()) {
      if (!m.away) events.On(JobEvent::NodeJoin(node, m.reg.host, m.reg.addr));
      seen.emplace(node, m.away);
      continue;
    }
    if (!was->second && m.away) {
      const std::string why = m.gone.what.empty() ? job::Describe(m.gone) : m.gone.what;
      events.On(JobEvent::NodeLoss(node, why));
    } else if (was->second && !m.away) {
      events.On(JobEvent::NodeReturn(node, m.reg.addr));
    }
    was->second = m.away;
  }
}

}  // namespace gculaunch
