#include "launcher/check/health_check.h"

#include <boost/asio/io_context.hpp>
#include <optional>
#include <utility>

#include "base/text.h"
#include "launcher/sys/health_runner.h"

namespace gculaunch {

namespace {

CheckItem ItemOf(const HealthRow& row) {
  CheckItem item;
  item.name = "health " + row.check;
  item.evidence = row.reason;
  switch (row.verdict) {
    case HealthVerdict::kHealthy:
      item.status = CheckStatus::kOk;
      break;
    case HealthVerdict::kUnhealthy:
      item.status = CheckStatus::kFail;
      item.fix = "a launch here would step aside before its first attempt (exit code 5): " +
                 std::string("replace or reset card(s) ") + Join(row.cards, ",") +
                 ", or run the job on another node";
      break;
    case HealthVerdict::kNotChecked:
      item.status = CheckStatus::kWarn;
      item.fix = "install the tool for this check, or ignore it: it is never counted unhealthy";
      break;
  }
  return item;
}

}  // namespace

std::vector<CheckItem> CheckHealth(const LaunchSpec& spec, const EnvMap& env,
                                   const DeviceProbe& probe) {
  std::optional<HealthPlan> plan = HealthPlanFor(spec, env);
  if (!plan) return {};
  boost::asio::io_context io;
  HealthRunner runner(io, std::move(*plan), probe);
  std::optional<HealthReport> report;
  runner.Check(0, [&report](HealthReport r) { report = std::move(r); });
  io.run();
  std::vector<CheckItem> items;
  if (!report) return items;
  for (const HealthRow& row : report->rows) items.push_back(ItemOf(row));
  return items;
}

}  // namespace gculaunch
