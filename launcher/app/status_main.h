// `gculaunch status`: the job running on this node at a glance, from the running gculaunch
// through its control socket (launcher/ops/control_socket.h; the "status" command that
// launcher/app/launch.cc registers, rendered by launcher/ops/status_view.h).
//
//   gculaunch status [--format text|json] [--watch [SECONDS]] [--job RUN_ID] [--node N]
//                    [--pid PID] [--timeout SECONDS]
//
// --watch asks again every SECONDS (default 2) until the job ends (its socket is gone: exit
// 0) or Ctrl-C.  Exit status: 0 shown, 1 no such job or no answer, 2 a usage error.
// Thread safety: main thread only.
#pragma once

#include <string>
#include <vector>

#include "base/env_map.h"

namespace gculaunch {

/// Runs `gculaunch status` with the arguments after "status".
int StatusMain(const std::vector<std::string>& args, const EnvMap& env);

}  // namespace gculaunch
