#include "launcher/cluster/member_events.h"

namespace gculaunch {

MemberFlags SnapshotMembers(const job::CoordinatorState& state) {
  MemberFlags flags;
  flags.reserve(state.members.size());
  for (const auto& [node, member] : state.members) flags.emplace_back(node, member.away);
  return flags;
}

void ReportMembers(const MemberFlags& before, const job::CoordinatorState& after,
                   JobEvents& events) {
  // Both are in node order (members is an ordered map): one merge-like walk.
  auto was = before.begin();
  for (const auto& [node, now] : after.members) {
    while (was != before.end() && was->first < node) ++was;
    if (was == before.end() || was->first != node) {
      if (!now.away) events.On(JobEvent::NodeJoin(node, now.reg.host, now.reg.addr));
      continue;
    }
    const bool was_away = was->second;
    if (!was_away && now.away) {
      const std::string why = now.gone.what.empty() ? job::Describe(now.gone) : now.gone.what;
      events.On(JobEvent::NodeLoss(node, why));
    } else if (was_away && !now.away) {
      events.On(JobEvent::NodeReturn(node, now.reg.addr));
    }
  }
}

}  // namespace gculaunch
