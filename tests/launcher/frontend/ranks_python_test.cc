#include "launcher/frontend/ranks_python.h"

#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "launcher/frontend/launch_spec.h"
#include "launcher/frontend/rank_env.h"

namespace gculaunch {
namespace {

using Vars = std::vector<std::string>;

LaunchSpec PythonSpec() {
  LaunchSpec spec;
  spec.profile = *FindBuiltinProfile("cpu");
  spec.python_origin = kPythonOnPath;
  return spec;
}

RanksTorch Found(const std::string& version) {
  return RanksTorch{RanksTorch::State::kFound, version, "found by running the shim once"};
}

}  // namespace

TEST_CASE("ranks python: the ranks run the interpreter a shim chose, with its variables",
          "[ranks_torch]") {
  LaunchSpec spec = PythonSpec();
  spec.python = "/p/shims/python3";
  spec.executable = spec.python;
  spec.argv = {spec.python, "-u", "train.py"};
  const EnvMap env{{"PATH", "/p/shims:/usr/bin"}};
  RanksPython python;
  python.torch = Found("2.6.0");
  python.shim = ShimChoice{"/p/shims/python3", "pyenv", "/p/versions/3.11.7/bin/python3", "3.11.7",
                           "pyenv, version 3.11.7 from /p/version, read without "
                           "running the shim"};
  LaunchSpec used = spec;
  UseRanksPython(used, env, python);
  CHECK(used.ranks_torch.version == "2.6.0");
  CHECK(used.python == "/p/versions/3.11.7/bin/python3");
  CHECK(used.executable == used.python);
  CHECK(used.argv == Vars{"/p/versions/3.11.7/bin/python3", "-u", "train.py"});
  CHECK(used.interpreter_shim == "/p/shims/python3");
  using Pairs = std::vector<std::pair<std::string, std::string>>;
  CHECK(used.interpreter_env ==
        Pairs{{"PATH", "/p/versions/3.11.7/bin:/p/shims:/usr/bin"}, {"PYENV_VERSION", "3.11.7"}});
  const EnvMap rank = BuildRankEnv(used, env, 1, 0, RankRuntime{"29500", "r", "/s"});
  CHECK(rank.Get("PATH") == "/p/versions/3.11.7/bin:/p/shims:/usr/bin");
  CHECK(rank.Get("PYENV_VERSION") == "3.11.7");
  CHECK(DescribeInterpreter(used) ==
        "interpreter /p/versions/3.11.7/bin/python3, which the shim /p/shims/python3 runs "
        "(pyenv, version 3.11.7 from /p/version, read without running the shim)");
  // --env PATH is the ranks' PATH the interpreter's directory goes before.
  LaunchSpec with_env = spec;
  with_env.extra_env = {{"PATH", "/opt/bin"}};
  UseRanksPython(with_env, env, python);
  CHECK(with_env.interpreter_env.front() ==
        std::pair<std::string, std::string>{"PATH", "/p/versions/3.11.7/bin:/opt/bin"});
  // pyenv's "system" adds nothing to PATH; a choice not known leaves the shim in place.
  python.shim.pyenv_version = "system";
  python.shim.interpreter = "/usr/bin/python3";
  LaunchSpec system = spec;
  UseRanksPython(system, env, python);
  CHECK(system.interpreter_env == Pairs{{"PYENV_VERSION", "system"}});
  python.shim.interpreter.clear();
  python.shim.how = "asdf's choice is learnt by running the shim";
  LaunchSpec unknown = spec;
  UseRanksPython(unknown, env, python);
  CHECK(unknown.python == "/p/shims/python3");
  CHECK(unknown.interpreter_shim.empty());
  CHECK(unknown.notes.back() ==
        "/p/shims/python3 is a pyenv shim; the ranks run it as it is "
        "(its interpreter is not known yet: asdf's choice is learnt "
        "by running the shim)");
}

}  // namespace gculaunch
