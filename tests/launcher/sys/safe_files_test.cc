#include "launcher/sys/safe_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "launcher/spec/python_shim.h"
#include "launcher/spec/stack_hook.h"
#include "tests/support/test_util.h"

namespace gculaunch {
namespace {

using testing::ReadFile;
using testing::TempDir;

// Names in `dir`, sorted.
std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("replace file: written whole, mode 0644, no temporary file left", "[safe_files]") {
  TempDir tmp;
  const std::string path = tmp.File("summary.json");
  REQUIRE(sys::ReplaceFile(path, "first\n").ok());
  REQUIRE(sys::ReplaceFile(path, "second\n").ok());
  CHECK(ReadFile(path) == "second\n");
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0644);
  CHECK(Names(tmp.path()) == std::vector<std::string>{"summary.json"});
}

TEST_CASE("replace file: planted symlinks (PATH.tmp, PATH) are not followed", "[safe_files]") {
  TempDir tmp;
  const std::string victim = tmp.Write("victim", "victim content\n");
  const std::string path = tmp.File("summary.json");
  // The name the old code wrote through (PATH.tmp), and the target itself.
  std::filesystem::create_symlink(victim, path + ".tmp");
  SECTION("at PATH.tmp") {}
  SECTION("at PATH too") { std::filesystem::create_symlink(victim, path); }
  REQUIRE(sys::ReplaceFile(path, "summary\n").ok());
  CHECK(ReadFile(victim) == "victim content\n");
  CHECK_FALSE(std::filesystem::is_symlink(path));
  CHECK(ReadFile(path) == "summary\n");
}

TEST_CASE("replace file: a missing directory is one line naming the path", "[safe_files]") {
  TempDir tmp;
  const Status status = sys::ReplaceFile(tmp.File("missing/summary.json"), "x");
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().what.rfind("cannot write " + tmp.File("missing/summary.json") + ": ", 0) ==
        0);
}

TEST_CASE("site dir: the shim and the hook written into the run's directory, again on a restart",
          "[safe_files]") {
  TempDir tmp;
  const std::string dir = tmp.path() + "/run/python-shim";
  REQUIRE(sys::WriteSiteDir("--python-shim", dir, PythonShimFiles()).ok());
  CHECK(ReadFile(dir + "/sitecustomize.py") == std::string(PythonShimFiles()[0].second));
  const auto perms = std::filesystem::status(dir + "/sitecustomize.py").permissions();
  CHECK((perms & std::filesystem::perms::others_read) != std::filesystem::perms::none);
  REQUIRE(sys::WriteSiteDir("--python-shim", dir, PythonShimFiles()).ok());
  CHECK(Names(dir) == std::vector<std::string>{"sitecustomize.py"});

  const std::string hook = tmp.path() + "/run/stack-hook";
  REQUIRE(sys::WriteSiteDir("--stack-dumps", hook, StackHookFiles()).ok());
  CHECK(ReadFile(hook + "/sitecustomize.py") == std::string(StackHookFiles()[0].second));

  tmp.Write("file-in-the-way", "x");
  const Status blocked =
      sys::WriteSiteDir("--python-shim", tmp.path() + "/file-in-the-way/python-shim", {});
  REQUIRE_FALSE(blocked.ok());
  CHECK(blocked.error().what.rfind(
            "--python-shim: cannot create '" + tmp.path() + "/file-in-the-way/python-shim': ", 0) ==
        0);
}

}  // namespace gculaunch
