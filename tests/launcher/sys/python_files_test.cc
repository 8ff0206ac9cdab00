#include "launcher/sys/python_files.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "tests/support/fake_pyenv.h"
#include "tests/support/test_util.h"

namespace gculaunch {
namespace {

using testing::TempDir;

constexpr char kPython[] = "/usr/bin/python3";

std::string RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  REQUIRE(::realpath(path.c_str(), resolved) != nullptr);
  return resolved;
}

void Torch(const TempDir& tmp, const std::string& dir, const std::string& version) {
  tmp.Write(dir + "/torch/__init__.py", "raise RuntimeError('imported')\n");
  tmp.Write(dir + "/torch/version.py", "__version__ = '" + version + "'\n");
}

}  // namespace

TEST_CASE("python files: pyenv's and asdf's shims are told from other programs", "[python_files]") {
  TempDir tmp;
  const testing::FakePyenv pyenv(tmp, "3.11.7", kPython);
  const auto shim = sys::ReadShim(pyenv.shim());
  REQUIRE(shim.has_value());
  CHECK(shim->kind == "pyenv");
  CHECK(shim->pyenv_root == pyenv.root());
  const std::string asdf = tmp.Write(
      "asdf/shims/python3",
      "#!/usr/bin/env bash\n# asdf-plugin: python 3.11.0\nexec /home/u/.asdf/bin/asdf exec "
      "\"python3\" \"$@\" # asdf_allow: ' asdf '\n");
  REQUIRE(sys::ReadShim(asdf).has_value());
  CHECK(sys::ReadShim(asdf)->kind == "asdf");
  // A wrapper that sets something up, an interpreter binary, a missing file: not shims.
  CHECK_FALSE(sys::ReadShim(tmp.Write("wrap", "#!/bin/sh\nexport X=1\nexec python3.11 \"$@\"\n")));
  CHECK_FALSE(sys::ReadShim(kPython));
  CHECK_FALSE(sys::ReadShim(tmp.File("nope")));
}

TEST_CASE("python files: pyenv's choice, as pyenv exec makes it", "[python_files]") {
  TempDir tmp;
  const testing::FakePyenv pyenv(tmp, "3.11.7", kPython);
  pyenv.Install("3.10.13");
  const sys::Shim shim = *sys::ReadShim(pyenv.shim());
  const std::string work = tmp.File("work/deep");
  REQUIRE(::system(("mkdir -p " + work).c_str()) == 0);
  std::string why;
  auto choose = [&](const EnvMap& env) {
    why.clear();
    return sys::ReadPyenvChoice(pyenv.shim(), shim, env, work, &why);
  };

  auto global = choose({});
  REQUIRE(global.has_value());
  CHECK(global->interpreter == pyenv.interpreter("3.11.7"));
  CHECK(global->pyenv_version == "3.11.7");
  CHECK(global->how ==
        "pyenv, version 3.11.7 from " + pyenv.root() + "/version, read without running the shim");
  // The nearest .python-version above the working directory wins over the global one.
  tmp.Write("work/.python-version", "# pinned\n\n3.10.13 extra words\n");
  CHECK(choose({})->interpreter == pyenv.interpreter("3.10.13"));
  CHECK(choose({})->how.find("from " + tmp.File("work/.python-version")) != std::string::npos);
  // PYENV_VERSION wins over both; pyenv drops an explicit "python-".
  CHECK(choose({{"PYENV_VERSION", "3.11.7"}})->interpreter == pyenv.interpreter("3.11.7"));
  CHECK(choose({{"PYENV_VERSION", "python-3.11.7"}})->pyenv_version == "3.11.7");
  // What the files do not settle is left to running the shim.
  CHECK_FALSE(choose({{"PYENV_VERSION", "3.11.7:3.10.13"}}));
  CHECK(why == "several versions (3.11.7:3.10.13)");
  CHECK_FALSE(choose({{"PYENV_VERSION", "system"}}));
  CHECK(why == "the system version");
  CHECK_FALSE(choose({{"PYENV_VERSION", "3.11"}}));  // a prefix: pyenv-latest's job
  CHECK(why == "version 3.11 is not installed under that name");
  CHECK_FALSE(choose({{"PYENV_VERSION", "../.."}}));
  CHECK_FALSE(choose({{"PYENV_DIR", "/elsewhere"}}));
  CHECK(why == "PYENV_DIR is set");
  // The files that could change the choice: every .python-version up from work, and the
  // global version file.
  const auto files = sys::ShimSelectionFiles(shim, {}, work);
  CHECK(files.front() == work + "/.python-version");
  CHECK(files.back() == pyenv.root() + "/version");
  CHECK(std::find(files.begin(), files.end(), "/.python-version") != files.end());
}

TEST_CASE("python files: torch from the search path an interpreter's layout gives",
          "[python_files]") {
  REQUIRE(::access(kPython, X_OK) == 0);  // CI: Debian's python3 (torch 1.13)
  TempDir tmp;
  const std::string script = tmp.Write("job/train.py");
  const EnvMap base{{"HOME", tmp.File("home")}};

  SECTION("PYTHONPATH before the site directories") {
    Torch(tmp, "site", "2.6.0");
    EnvMap env = base;
    env.Set("PYTHONPATH", tmp.File("nothing") + ":" + tmp.File("site"));
    const RanksTorch torch = sys::ReadRanksTorch(kPython, "script", script, env, tmp.path());
    CHECK(torch.state == RanksTorch::State::kFound);
    CHECK(torch.version == "2.6.0");
    CHECK(torch.how ==
          "read from " + tmp.File("site/torch/version.py") + ", without running " + kPython);
  }
  SECTION("the script's directory shadows everything; -m searches the working directory") {
    Torch(tmp, "job", "2.3.0");
    Torch(tmp, "cwd", "2.4.0");
    CHECK(sys::ReadRanksTorch(kPython, "script", script, base, tmp.path()).version == "2.3.0");
    CHECK(sys::ReadRanksTorch(kPython, "cwd", "", base, tmp.File("cwd")).version == "2.4.0");
    EnvMap safe = base;
    safe.Set("PYTHONSAFEPATH", "1");
    CHECK(sys::ReadRanksTorch(kPython, "script", script, safe, tmp.path()).version != "2.3.0");
  }
  SECTION("the user's site-packages, unless PYTHONNOUSERSITE") {
    const std::string version = RealPath(kPython).substr(RealPath(kPython).rfind("python") + 6);
    Torch(tmp, "home/.local/lib/python" + version + "/site-packages", "2.5.0");
    CHECK(sys::ReadRanksTorch(kPython, "script", script, base, tmp.path()).version == "2.5.0");
    EnvMap off = base;
    off.Set("PYTHONNOUSERSITE", "1");
    CHECK(sys::ReadRanksTorch(kPython, "script", script, off, tmp.path()).version != "2.5.0");
  }
  SECTION("a venv: its site-packages; without the system's, no user site either") {
    const std::string real = RealPath(kPython);
    const std::string version = real.substr(real.rfind("python") + 6);
    tmp.Write("venv/pyvenv.cfg", "home = /usr/bin\ninclude-system-site-packages = false\n");
    REQUIRE(::mkdir(tmp.File("venv/bin").c_str(), 0755) == 0);
    REQUIRE(::symlink(real.c_str(), tmp.File("venv/bin/python3").c_str()) == 0);
    Torch(tmp, "home/.local/lib/python" + version + "/site-packages", "2.5.0");
    Torch(tmp, "venv/lib/python" + version + "/site-packages", "2.7.0");
    const std::string venv_python = tmp.File("venv/bin/python3");
    CHECK(sys::ReadRanksTorch(venv_python, "script", script, base, tmp.path()).version == "2.7.0");
    REQUIRE(::system(("rm -r " + tmp.File("venv/lib")).c_str()) == 0);
    const RanksTorch none = sys::ReadRanksTorch(venv_python, "script", script, base, tmp.path());
    CHECK(none.state == RanksTorch::State::kUnknown);
    CHECK(none.how.rfind("no torch package on the search path", 0) == 0);
  }
  SECTION("what the files cannot settle is unknown") {
    EnvMap home = base;
    home.Set("PYTHONHOME", "/usr");
    CHECK(sys::ReadRanksTorch(kPython, "script", script, home, tmp.path()).how ==
          "PYTHONHOME is set; not known without running the interpreter");
    const std::string wrapper =
        tmp.Write("python3.11", "#!/bin/sh\nexec /usr/bin/python3 \"$@\"\n");
    REQUIRE(::chmod(wrapper.c_str(), 0755) == 0);
    CHECK(sys::ReadRanksTorch(wrapper, "script", script, base, tmp.path()).state ==
          RanksTorch::State::kUnknown);
    tmp.Write("job/torch.py");
    const RanksTorch module = sys::ReadRanksTorch(kPython, "script", script, base, tmp.path());
    CHECK(module.state == RanksTorch::State::kUnknown);
    CHECK(module.how.rfind(tmp.File("job/torch.py") + " is not a plain package", 0) == 0);
  }
}

}  // namespace gculaunch
