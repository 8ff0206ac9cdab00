// CheckMain: `gculaunch check [FLAGS] [SCRIPT [ARGS...]]`, the preflight check.
//
// It accepts the launch's own flags (and PET_* variables), so prefixing a
// launch command with `check` examines exactly that launch; SCRIPT is
// optional.  The flags that matter: --device, --nproc-per-node, --nnodes,
// --node-rank, --master-addr, --master-port, --standalone, --bind, --env,
// --python, --sysroot, and --format text|json (text is the default; `table`
// is accepted as its other name).  See preflight.h for the checks.
//
// Exit codes: 0 nothing failed (warnings allowed), 1 at least one check
// failed, 2 a usage error (bad flag, unknown device profile, ...).
//
// Thread safety: called once from main().
#pragma once

#include <string>
#include <vector>

#include "base/env_map.h"

namespace gculaunch {

/// Runs the check with the arguments after "check" and the environment as
/// read by main(); prints to stdout (the report) and stderr (usage errors).
int CheckMain(const std::vector<std::string>& args, const EnvMap& env);

/// Exit code of `gculaunch check` when a check failed.
inline constexpr int kCheckFailed = 1;

}  // namespace gculaunch
