// The one Catch2 main shared by every unit-test binary.  Like gculaunch's own main, it
// runs the guardian mode (launcher/sys/guardian.h) when asked: the guardian executes
// /proc/self/exe, which in a test is the test binary.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "launcher/sys/guardian.h"

int main(int argc, char** argv) {
  if (gculaunch::sys::IsGuardianCommand(argc, argv)) gculaunch::sys::RunGuardian();
  return Catch::Session().run(argc, argv);
}
