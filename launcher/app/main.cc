// gculaunch's entry point: the only place that reads the process environment.
//
//   gculaunch store ...           the rendezvous store alone (rendezvous/store_command.h)
//   gculaunch check ...           the preflight check (launcher/app/check_main.h)
//   gculaunch stacks ...          the Python stacks of this node's running ranks
//                                 (launcher/app/stacks_main.h)
//   gculaunch status ...          the job running on this node (launcher/app/status_main.h)
//   gculaunch [OPTIONS] SCRIPT    launch or dry-run a job (launcher/app/launcher_main.h)
#include <string>
#include <string_view>
#include <vector>

#include "base/env_map.h"
#include "launcher/app/check_main.h"
#include "launcher/app/launcher_main.h"
#include "launcher/app/stacks_main.h"
#include "launcher/app/status_main.h"
#include "launcher/sys/guardian.h"
#include "rendezvous/store_command.h"

extern char** environ;

int main(int argc, char** argv) {
  // gculaunch's guardian (launcher/sys/guardian.h): its own binary with a short argv.
  if (gculaunch::sys::IsGuardianCommand(argc, argv)) gculaunch::sys::RunGuardian();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "store") {
    return gculaunch::rendezvous::StoreMain({args.begin() + 1, args.end()});
  }
  if (!args.empty() && args[0] == "check") {
    return gculaunch::CheckMain({args.begin() + 1, args.end()},
                                gculaunch::EnvMap::FromEnviron(environ));
  }
  if (!args.empty() && args[0] == "stacks") {
    return gculaunch::StacksMain({args.begin() + 1, args.end()},
                                 gculaunch::EnvMap::FromEnviron(environ));
  }
  if (!args.empty() && args[0] == "status") {
    return gculaunch::StatusMain({args.begin() + 1, args.end()},
                                 gculaunch::EnvMap::FromEnviron(environ));
  }
  return gculaunch::LauncherMain(args, gculaunch::EnvMap::FromEnviron(environ));
}
