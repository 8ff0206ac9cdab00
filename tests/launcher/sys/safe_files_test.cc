#include "launcher/sys/safe_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "launcher/frontend/python_shim.h"
#include "launcher/frontend/stack_hook.h"
#include "launcher/sys/local_files.h"
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
  for (const auto& [name, text] : PythonShimFiles()) {
    CHECK(ReadFile(dir + "/" + std::string(name)) == std::string(text));
  }
  const auto perms = std::filesystem::status(dir + "/sitecustomize.py").permissions();
  CHECK((perms & std::filesystem::perms::others_read) != std::filesystem::perms::none);
  REQUIRE(sys::WriteSiteDir("--python-shim", dir, PythonShimFiles()).ok());
  CHECK(Names(dir) == std::vector<std::string>{"_gculaunch_site.py", "sitecustomize.py"});

  const std::string hook = tmp.path() + "/run/stack-hook";
  REQUIRE(sys::WriteSiteDir("--stack-dumps", hook, StackHookFiles()).ok());
  for (const auto& [name, text] : StackHookFiles()) {
    CHECK(ReadFile(hook + "/" + std::string(name)) == std::string(text));
  }
  CHECK(Names(hook) == std::vector<std::string>{"_gculaunch_site.py", "sitecustomize.py"});

  tmp.Write("file-in-the-way", "x");
  const Status blocked =
      sys::WriteSiteDir("--python-shim", tmp.path() + "/file-in-the-way/python-shim", {});
  REQUIRE_FALSE(blocked.ok());
  CHECK(blocked.error().what.rfind(
            "--python-shim: cannot create '" + tmp.path() + "/file-in-the-way/python-shim': ", 0) ==
        0);
}

TEST_CASE("bounded read: a regular file of at most 1 MiB, nothing else", "[safe_files]") {
  TempDir tmp;
  const std::string limit = std::string(sys::kMaxReadFileBytes, 'x');
  SECTION("exactly the limit is read whole") {
    auto text = sys::ReadBoundedFile(tmp.Write("job.yaml", limit));
    REQUIRE(text.ok());
    CHECK(text->size() == sys::kMaxReadFileBytes);
  }
  SECTION("one byte more is refused, naming the file and the limit") {
    const std::string path = tmp.Write("big.yaml", limit + "x");
    auto text = sys::ReadBoundedFile(path);
    REQUIRE_FALSE(text.ok());
    CHECK(text.error().what == "'" + path +
                                   "' is larger than 1 MiB, the most gculaunch reads of a file it "
                                   "is given");
  }
  SECTION("/dev/zero: a character device, not read at all") {
    auto text = LocalFileAccess().ReadTextFile("/dev/zero");
    REQUIRE_FALSE(text.ok());
    CHECK(text.error().what == "'/dev/zero' is a character device, not a regular file");
    CHECK(text.error().hint == "name a regular file");
  }
  SECTION("a FIFO without a writer is refused at once, not waited for") {
    const std::string fifo = tmp.File("fifo");
    testing::MakeFifo(fifo);
    auto text = sys::ReadBoundedFile(fifo);
    REQUIRE_FALSE(text.ok());
    CHECK(text.error().what == "'" + fifo + "' is a FIFO, not a regular file");
  }
  SECTION("a directory") {
    auto text = sys::ReadBoundedFile(tmp.path());
    REQUIRE_FALSE(text.ok());
    CHECK(text.error().what == "'" + tmp.path() + "' is a directory, not a regular file");
  }
  SECTION("a missing file") {
    auto text = sys::ReadBoundedFile(tmp.File("missing"));
    REQUIRE_FALSE(text.ok());
    CHECK(text.error().what ==
          "cannot read '" + tmp.File("missing") + "': No such file or directory");
  }
}

}  // namespace gculaunch
