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

// ---- files a rank can create or replace ----

namespace {

sys::RankFileRules OwnRules(size_t limit = sys::kMaxReadFileBytes) {
  sys::RankFileRules rules;
  rules.owner = ::geteuid();
  rules.limit = limit;
  return rules;
}

}  // namespace

TEST_CASE("rank file: the job's user's regular file is read once, with its mtime", "[safe_files]") {
  TempDir tmp;
  const std::string path = tmp.Write("error.json", "{\"message\": \"boom\"}");
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  auto read = sys::ReadRankFile(path, OwnRules());
  REQUIRE(read.ok());
  CHECK(read->found);
  CHECK(read->text == "{\"message\": \"boom\"}");
  CHECK_FALSE(read->cut);
  CHECK(read->mtime_ns ==
        static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec);
}

TEST_CASE("rank file: nothing at the path is not an error", "[safe_files]") {
  TempDir tmp;
  auto read = sys::ReadRankFile(tmp.File("error.json"), OwnRules());
  REQUIRE(read.ok());
  CHECK_FALSE(read->found);
  CHECK(read->text.empty());
}

TEST_CASE("rank file: links, FIFOs, devices, directories and other owners are refused",
          "[safe_files]") {
  TempDir tmp;
  const std::string path = tmp.File("error.json");
  std::string why;
  sys::RankFileRules rules = OwnRules();
  SECTION("a link to a regular file the user may read") {
    std::filesystem::create_symlink(tmp.Write("readable.json", "{}"), path);
    why = "is a symbolic link (gculaunch does not follow one there)";
  }
  SECTION("a link to /dev/zero") {
    std::filesystem::create_symlink("/dev/zero", path);
    why = "is a symbolic link (gculaunch does not follow one there)";
  }
  SECTION("a dangling link") {
    std::filesystem::create_symlink(tmp.File("nowhere"), path);
    why = "is a symbolic link (gculaunch does not follow one there)";
  }
  SECTION("a FIFO without a writer: refused at once, not waited for") {
    testing::MakeFifo(path);
    why = "is a FIFO, not a regular file";
  }
  SECTION("a directory") {
    std::filesystem::create_directory(path);
    why = "is a directory, not a regular file";
  }
  SECTION("a regular file of another user") {
    tmp.Write("error.json", "{}");
    rules.owner = ::geteuid() + 1;
    why = "is owned by uid " + std::to_string(::geteuid()) + ", not by the job's user (uid " +
          std::to_string(::geteuid() + 1) + ")";
  }
  auto read = sys::ReadRankFile(path, rules);
  REQUIRE_FALSE(read.ok());
  CHECK(read.error().what == "'" + path + "' " + why);
}

TEST_CASE("rank file: a device named directly is refused, not read", "[safe_files]") {
  sys::RankFileRules rules;
  rules.owner = 0;  // /dev/zero is root's: only its kind refuses it
  auto read = sys::ReadRankFile("/dev/zero", rules);
  REQUIRE_FALSE(read.ok());
  CHECK(read.error().what == "'/dev/zero' is a character device, not a regular file");
}

TEST_CASE("rank file: a larger file is cut at the limit and says so, an offset skips",
          "[safe_files]") {
  TempDir tmp;
  const std::string path = tmp.Write("dump.txt", "0123456789");
  SECTION("exactly the limit is whole") {
    auto read = sys::ReadRankFile(path, OwnRules(10));
    REQUIRE(read.ok());
    CHECK(read->text == "0123456789");
    CHECK_FALSE(read->cut);
  }
  SECTION("one byte more is cut") {
    auto read = sys::ReadRankFile(path, OwnRules(9));
    REQUIRE(read.ok());
    CHECK(read->text == "012345678");
    CHECK(read->cut);
  }
  SECTION("from an offset") {
    sys::RankFileRules rules = OwnRules(3);
    rules.offset = 4;
    auto read = sys::ReadRankFile(path, rules);
    REQUIRE(read.ok());
    CHECK(read->text == "456");
    CHECK(read->cut);
  }
  SECTION("a 300 MB sparse file: only the limit and one byte are read") {
    const std::string big = tmp.File("big.json");
    std::filesystem::resize_file(tmp.Write("big.json", "{"), 300u << 20);
    auto read = sys::ReadRankFile(big, OwnRules());
    REQUIRE(read.ok());
    CHECK(read->text.size() == sys::kMaxReadFileBytes);
    CHECK(read->cut);
  }
}

TEST_CASE("rank file stat: the job's user's regular files only, never through a link",
          "[safe_files]") {
  TempDir tmp;
  const std::string file = tmp.Write("heartbeat", "12345");
  auto st = sys::StatRankFile(file, ::geteuid());
  REQUIRE(st);
  CHECK(st->size == 5);
  CHECK(st->mtime_ns > 0);
  CHECK_FALSE(sys::StatRankFile(file, ::geteuid() + 1));
  CHECK_FALSE(sys::StatRankFile(tmp.File("missing"), ::geteuid()));
  std::filesystem::create_symlink(file, tmp.File("link"));
  CHECK_FALSE(sys::StatRankFile(tmp.File("link"), ::geteuid()));
  testing::MakeFifo(tmp.File("fifo"));
  CHECK_FALSE(sys::StatRankFile(tmp.File("fifo"), ::geteuid()));
  CHECK_FALSE(sys::StatRankFile(tmp.path(), ::geteuid()));
}

}  // namespace gculaunch
