#include "launcher/launcher_main.h"

#include <cstdio>

#include "launcher/exit_codes.h"

namespace gculaunch {

// Placeholder: replaced by the launcher core.
int LauncherMain(const std::vector<std::string>& args, const EnvMap& /*env*/) {
  if (!args.empty() && args[0] == "--version") {
    std::puts("gculaunch " GCULAUNCH_VERSION);
    return exit_code::kSuccess;
  }
  std::fputs("gculaunch: the launcher is not built yet\n", stderr);
  return exit_code::kInternal;
}

}  // namespace gculaunch
