#include "launcher/sys/torch_probe.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "tests/support/fake_pyenv.h"
#include "tests/support/test_util.h"

namespace gculaunch {
namespace {

using testing::TempDir;

constexpr char kPython[] = "/usr/bin/python3";

// A torch that must not be imported: its __init__ raises, its version.py says `version`.
std::string FakeTorch(const TempDir& tmp, const std::string& version) {
  tmp.Write("site/torch/__init__.py", "raise RuntimeError('the probe imported torch')\n");
  tmp.Write("site/torch/version.py", "__version__ = '" + version + "'\ndebug = False\n");
  return tmp.File("site");
}

LaunchSpec PythonSpec(const std::string& python, const std::string& script) {
  LaunchSpec spec;
  spec.profile = *FindBuiltinProfile("cpu");
  spec.python = python;
  spec.python_origin = "--python";
  spec.executable = python;
  spec.argv = {python, "-u", script};
  return spec;
}

sys::TorchProbeOptions CacheIn(const TempDir& tmp) {
  sys::TorchProbeOptions options;
  options.cache = true;
  options.cache_env = EnvMap{{"XDG_CACHE_HOME", tmp.File("xdg")}};
  options.uid = ::geteuid();
  options.cwd = tmp.path();
  return options;
}

}  // namespace

TEST_CASE("torch probe: the files answer at once, the probe caches, the next start hits",
          "[torch_probe]") {
  REQUIRE(::access(kPython, X_OK) == 0);  // CI: Debian's python3 (torch 1.13)
  TempDir tmp;
  const std::string site = FakeTorch(tmp, "2.6.0");
  const std::string script = tmp.Write("job/train.py", "print('hi')\n");
  const LaunchSpec spec = PythonSpec(kPython, script);
  const EnvMap env{{"PATH", "/usr/bin:/bin"}, {"PYTHONPATH", site}};
  const sys::TorchProbeOptions options = CacheIn(tmp);

  sys::TorchProbe first = sys::TorchProbe::Start(spec, env, options);
  CHECK_FALSE(first.answered());
  // Before any interpreter ran: torch's version.py on the search path.
  CHECK(first.Quick().torch.state == RanksTorch::State::kFound);
  CHECK(first.Quick().torch.version == "2.6.0");
  CHECK(first.Quick().torch.how ==
        "read from " + site + "/torch/version.py, without running " + kPython);
  const RanksPython found = first.Finish();
  INFO(found.torch.how);
  CHECK(found.torch.version == "2.6.0");
  CHECK(found.torch.how == std::string("found by running ") + kPython + " once; cached");
  CHECK(found.shim.shim.empty());

  sys::TorchProbe second = sys::TorchProbe::Start(spec, env, options);
  CHECK(second.answered());
  CHECK(second.Quick().torch.version == "2.6.0");
  CHECK(second.Quick().torch.how.rfind("from the cache", 0) == 0);
  CHECK_FALSE(second.FinishIfDone().has_value());  // nothing ran

  // An upgrade in place is seen at once, by the files too.
  tmp.Write("site/torch/version.py", "__version__ = '2.10.1'\n");
  sys::TorchProbe third = sys::TorchProbe::Start(spec, env, options);
  CHECK_FALSE(third.answered());
  CHECK(third.Quick().torch.version == "2.10.1");
  CHECK(third.Finish().torch.version == "2.10.1");

  // Another PYTHONPATH is another question: Debian's own torch 1.13 (or none) then.
  const EnvMap bare{{"PATH", "/usr/bin:/bin"}, {"PYTHONPATH", tmp.File("nothing")}};
  sys::TorchProbe other = sys::TorchProbe::Start(spec, bare, options);
  CHECK_FALSE(other.answered());
  CHECK(other.Finish().torch.version != "2.10.1");
}

TEST_CASE("torch probe: the script's directory is searched as in the rank", "[torch_probe]") {
  REQUIRE(::access(kPython, X_OK) == 0);
  TempDir tmp;
  tmp.Write("job/torch/__init__.py", "raise RuntimeError('imported')\n");
  tmp.Write("job/torch/version.py", "__version__ = '2.3.0'\n");
  const LaunchSpec spec = PythonSpec(kPython, tmp.Write("job/train.py"));
  // No cache: every launch answers from the files, and the probe only confirms.
  sys::TorchProbe probe = sys::TorchProbe::Start(spec, EnvMap{{"PATH", "/usr/bin:/bin"}}, {});
  CHECK(probe.Quick().torch.version == "2.3.0");
  const RanksPython torch = probe.Finish();
  INFO(torch.torch.how);
  CHECK(torch.torch.version == "2.3.0");
  CHECK(torch.torch.how == "read from " + tmp.File("job/torch/version.py") + ", without running " +
                               kPython + "; running " + kPython +
                               " found torch 2.3.0, not cached: no cache");
}

TEST_CASE("torch probe: a failure leaves the quick answer, never an error", "[torch_probe]") {
  // (and an answer that could not be checked later is not cached)
  TempDir tmp;
  sys::TorchProbeOptions options = CacheIn(tmp);
  options.timeout_s = 0.5;

  SECTION("an interpreter that hangs is stopped at the bound") {
    const std::string slow = tmp.Write("slow", "#!/bin/sh\nsleep 30\n");
    REQUIRE(::chmod(slow.c_str(), 0755) == 0);
    const auto started = std::chrono::steady_clock::now();
    const RanksPython torch =
        sys::TorchProbe::Start(PythonSpec(slow, "x.py"), {}, options).Finish();
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
    CHECK(torch.torch.state == RanksTorch::State::kUnknown);
    CHECK(torch.torch.how == slow +
                                 " is not a Python binary named pythonX.Y; not known without "
                                 "running the interpreter; " +
                                 slow + " did not answer within 0.5 s");
  }
  SECTION("a launch's end does not wait for it: it is stopped") {
    const std::string slow = tmp.Write("slow", "#!/bin/sh\nsleep 30\n");
    REQUIRE(::chmod(slow.c_str(), 0755) == 0);
    options.timeout_s = 30;
    sys::TorchProbe probe = sys::TorchProbe::Start(PythonSpec(slow, "x.py"), {}, options);
    CHECK_FALSE(probe.answered());
    probe.Begin();
    const auto started = std::chrono::steady_clock::now();
    CHECK_FALSE(probe.FinishIfDone().has_value());
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
    CHECK(probe.answered());
  }
  SECTION("an interpreter that does not exist") {
    const RanksPython torch =
        sys::TorchProbe::Start(PythonSpec(tmp.File("nope"), "x.py"), {}, options).Finish();
    CHECK(torch.torch.state == RanksTorch::State::kUnknown);
    CHECK(torch.torch.how.find("cannot run") != std::string::npos);
  }
  SECTION("an interpreter that says something else") {
    const std::string odd = tmp.Write("odd", "#!/bin/sh\necho hello\n");
    REQUIRE(::chmod(odd.c_str(), 0755) == 0);
    const RanksPython torch = sys::TorchProbe::Start(PythonSpec(odd, "x.py"), {}, options).Finish();
    CHECK(torch.torch.state == RanksTorch::State::kUnknown);
  }
  SECTION("an interpreter that sees other files (a chroot) is not cached") {
    const std::string chrooted = tmp.Write(
        "chrooted",
        "#!/bin/sh\ncat <<'EOF'\ngculaunch-torch-probe: {\"version_file\": "
        "\"/v/torch/version.py\", \"version_text\": \"__version__ = '2.6.0'\", \"checks\": "
        "[[\"/v/torch/version.py\", \"1:2:3:4:5\"]]}\nEOF\n");
    REQUIRE(::chmod(chrooted.c_str(), 0755) == 0);
    sys::TorchProbe probe = sys::TorchProbe::Start(PythonSpec(chrooted, "x.py"), {}, options);
    const RanksPython torch = probe.Finish();
    // A launch cannot know it without running the wrapper: it uses the quick answer, and the
    // dry run says so.
    CHECK(torch.torch.state == RanksTorch::State::kUnknown);
    CHECK(torch.torch.how.find("; running " + chrooted +
                               " found torch 2.6.0, not cached: it does not see "
                               "/v/torch/version.py as gculaunch does") != std::string::npos);
  }
  SECTION("--no-python asks nobody") {
    LaunchSpec spec = PythonSpec("", "x.py");
    spec.argv = {"/bin/true"};
    sys::TorchProbe probe = sys::TorchProbe::Start(spec, {}, options);
    CHECK(probe.answered());
    const RanksPython torch = probe.Finish();
    CHECK(torch.torch.state == RanksTorch::State::kNotProbed);
    CHECK(torch.torch.how == "--no-python");
  }
  // Nothing unknown or unusable is cached.
  CHECK(::access(tmp.File("xdg").c_str(), F_OK) != 0);
}

TEST_CASE("torch probe: the interpreter behind a pyenv shim, from its files, then the cache",
          "[torch_probe]") {
  REQUIRE(::access(kPython, X_OK) == 0);
  TempDir tmp;
  const testing::FakePyenv pyenv(tmp, "9.9.9", kPython);
  const std::string site = FakeTorch(tmp, "2.6.0");
  LaunchSpec spec = PythonSpec(pyenv.shim(), tmp.Write("job/train.py"));
  spec.python_origin = kPythonOnPath;
  const EnvMap env{{"PATH", pyenv.root() + "/shims:/usr/bin:/bin"}, {"PYTHONPATH", site}};
  sys::TorchProbeOptions options = CacheIn(tmp);
  options.cwd = tmp.File("job");

  sys::TorchProbe first = sys::TorchProbe::Start(spec, env, options);
  const ShimChoice& quick = first.Quick().shim;
  CHECK(quick.shim == pyenv.shim());
  CHECK(quick.kind == "pyenv");
  CHECK(quick.interpreter == pyenv.interpreter("9.9.9"));
  CHECK(quick.pyenv_version == "9.9.9");
  CHECK(quick.how ==
        "pyenv, version 9.9.9 from " + pyenv.root() + "/version, read without running the shim");
  CHECK(first.Quick().torch.version == "2.6.0");
  const RanksPython probed = first.Finish();
  INFO(probed.torch.how);
  CHECK(probed.torch.how == "found by running " + pyenv.shim() + " once; cached");
  CHECK(probed.shim.interpreter == pyenv.interpreter("9.9.9"));
  CHECK(probed.shim.pyenv_version == "9.9.9");
  CHECK(probed.shim.how == "pyenv, found by running the shim once");

  sys::TorchProbe second = sys::TorchProbe::Start(spec, env, options);
  REQUIRE(second.answered());
  CHECK(second.Quick().shim.interpreter == pyenv.interpreter("9.9.9"));
  CHECK(second.Quick().shim.how == "pyenv, from the cache; found by running the shim earlier");

  // A .python-version that appears where the ranks start may choose another: a miss.
  pyenv.Install("9.9.8");
  tmp.Write("job/.python-version", "9.9.8\n");
  sys::TorchProbe third = sys::TorchProbe::Start(spec, env, options);
  CHECK_FALSE(third.answered());
  CHECK(third.Quick().shim.interpreter == pyenv.interpreter("9.9.8"));
  // So does PYENV_VERSION (the probe runs in this process's directory, not options.cwd).
  EnvMap chosen = env;
  chosen.Set("PYENV_VERSION", "9.9.8");
  sys::TorchProbe fourth = sys::TorchProbe::Start(spec, chosen, options);
  CHECK_FALSE(fourth.answered());
  CHECK(fourth.Quick().shim.how ==
        "pyenv, version 9.9.8 from PYENV_VERSION, read without running the shim");
  CHECK(fourth.Finish().shim.interpreter == pyenv.interpreter("9.9.8"));

  // --python names the shim: used exactly as given.
  spec.python_origin = "--python";
  sys::TorchProbe given = sys::TorchProbe::Start(spec, env, options);
  CHECK(given.Quick().shim.shim.empty());
  CHECK(given.Finish().shim.interpreter.empty());
}

}  // namespace gculaunch
