// ParseControlArgs (launcher/app/control_args.h): the flags `gculaunch stacks` and `gculaunch
// status` share, and a client's own flags through the callback.
#include "launcher/app/control_args.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace gculaunch {
namespace {

TEST_CASE("the shared flags choose the job and the timeout", "[control_args]") {
  ControlArgs a;
  a.timeout_s = 30;
  REQUIRE(
      ParseControlArgs("stacks", {"--job", "r1", "--node", "2", "--pid", "4242"}, {}, nullptr, &a)
          .ok());
  CHECK(a.selector.run_id == "r1");
  CHECK(a.selector.node_rank == 2);
  CHECK(a.selector.pid == 4242);
  CHECK(a.timeout_s == 30);  // the client's default stays
  REQUIRE(ParseControlArgs("stacks", {"--timeout", "2.5"}, {}, nullptr, &a).ok());
  CHECK(a.timeout_s == 2.5);
  CHECK_FALSE(a.help);
}

TEST_CASE("a client own flags reach its callback and help stops the reading", "[control_args]") {
  ControlArgs a;
  std::vector<std::string> seen;
  auto own = [&](const std::string& flag, const std::string& value) -> Status {
    seen.push_back(flag + "=" + value);
    return OkStatus();
  };
  REQUIRE(ParseControlArgs("status", {"--format", "json", "--node", "0", "--help", "--bogus"},
                           {"--format"}, own, &a)
              .ok());
  CHECK(seen == std::vector<std::string>{"--format=json"});
  CHECK(a.selector.node_rank == 0);
  CHECK(a.help);
}

TEST_CASE("bad arguments are one line naming the command, the flag and the fix", "[control_args]") {
  struct Case {
    std::vector<std::string> args;
    std::string what;
    std::string hint;
  };
  const std::vector<Case> cases = {
      {{"--bogus"}, "gculaunch stacks: unknown argument '--bogus'", "see gculaunch stacks --help"},
      {{"--node"}, "gculaunch stacks: --node needs a value", "see gculaunch stacks --help"},
      {{"--node", "-1"},
       "gculaunch stacks: --node '-1' is not a node rank",
       "give a node rank, e.g. --node 1"},
      {{"--pid", "0"},
       "gculaunch stacks: --pid '0' is not a process id",
       "give the pid of a running gculaunch, e.g. --pid 4242"},
      {{"--pid", "12x"},
       "gculaunch stacks: --pid '12x' is not a process id",
       "give the pid of a running gculaunch, e.g. --pid 4242"},
      {{"--timeout", "0"},
       "gculaunch stacks: --timeout '0' is not a number of seconds",
       "give seconds between 0 and 3600, e.g. --timeout 30"},
      {{"--timeout", "3601"},
       "gculaunch stacks: --timeout '3601' is not a number of seconds",
       "give seconds between 0 and 3600, e.g. --timeout 30"},
      {{"--job", ""}, "gculaunch stacks: --job is empty", "give the run id"},
  };
  for (const Case& c : cases) {
    ControlArgs a;
    const Status got = ParseControlArgs("stacks", c.args, {}, nullptr, &a);
    INFO(c.what);
    REQUIRE_FALSE(got.ok());
    CHECK(got.error().what == c.what);
    CHECK(got.error().hint == c.hint);
  }
}

TEST_CASE("an error of a client's own flag is passed on as it is", "[control_args]") {
  ControlArgs a;
  auto own = [](const std::string&, const std::string& value) -> Status {
    return Error{"gculaunch status: --format '" + value + "' is not a format", "use text"};
  };
  const Status got = ParseControlArgs("status", {"--format", "yaml"}, {"--format"}, own, &a);
  REQUIRE_FALSE(got.ok());
  CHECK(got.error().what == "gculaunch status: --format 'yaml' is not a format");
}

}  // namespace
}  // namespace gculaunch
