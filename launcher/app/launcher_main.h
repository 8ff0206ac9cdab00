// LauncherMain: `gculaunch [OPTIONS] SCRIPT [ARGS...]` (launch or --dry-run).
#pragma once

#include <string>
#include <vector>

#include "base/env_map.h"

namespace gculaunch {

/// Runs the launcher with the arguments after argv[0] and the process
/// environment as read by main().  Returns gculaunch's exit code (exit_codes.h).
int LauncherMain(const std::vector<std::string>& args, const EnvMap& env);

}  // namespace gculaunch
