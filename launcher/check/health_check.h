// CheckHealth: `gculaunch check`'s health rows, the same checks the launch's gate runs before
// every attempt (launcher/sys/health_runner.h, launcher/frontend/device_health.h): the device
// files and driver, the device profile's vendor tool, and --health-check when given.  One
// CheckItem per row, named "health <check>": healthy is ok, unhealthy fails, not checked warns.
//
// Thread safety: blocks the calling thread (the main thread: the runner's children) for at
// most the tools' timeouts, on an io_context of its own.
#pragma once

#include <vector>

#include "base/env_map.h"
#include "launcher/check/preflight.h"
#include "launcher/frontend/device_profile.h"
#include "launcher/frontend/launch_spec.h"

namespace gculaunch {

/// The health rows for the node `spec` describes; empty when nothing would be checked.
/// `env`: gculaunch's own environment (the commands inherit it).
std::vector<CheckItem> CheckHealth(const LaunchSpec& spec, const EnvMap& env,
                                   const DeviceProbe& probe);

}  // namespace gculaunch
