#include "launcher/cluster/member_events.h"

namespace gculaunch {

void ReportMembers(const job::CoordinatorState& before, const job::CoordinatorState& after,
                   JobEvents& events) {
  for (const auto& [node, now] : after.members) {
    auto was = before.members.find(node);
    if (was == before.members.end()) {
      if (!now.away) events.On(JobEvent::NodeJoin(node, now.reg.host, now.reg.addr));
      continue;
    }
    if (!was->second.away && now.away) {
      const std::string why = now.gone.what.empty() ? job::Describe(now.gone) : now.gone.what;
      events.On(JobEvent::NodeLoss(node, why));
    } else if (was->second.away && !now.away) {
      events.On(JobEvent::NodeReturn(node, now.reg.addr));
    }
  }
}

}  // namespace gculaunch
