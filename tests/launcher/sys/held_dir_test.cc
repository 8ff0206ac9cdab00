#include "launcher/sys/held_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "tests/support/test_util.h"

namespace gculaunch {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::TempDir;

constexpr uid_t kOther = 65534;  // nobody

}  // namespace

TEST_CASE(
    "held dir: files go below the directory that was opened, whatever its name "
    "points to later",
    "[held_dir]") {
  TempDir tmp;
  auto base = sys::HeldDir::Open(tmp.File("logs/deep"));  // created, as mkdir -p
  REQUIRE(base.ok());
  auto run = base->MakeUniqueChild("job_");
  REQUIRE(run.ok());
  const std::string run_path = run->PathOf();
  CHECK(run_path.rfind(tmp.File("logs/deep/job_"), 0) == 0);
  struct stat st {};
  REQUIRE(::stat(run_path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);

  // Another user swaps the run directory for a link to a directory of theirs.
  fs::rename(run_path, run_path + ".moved");
  fs::create_directory(tmp.File("evil"));
  fs::create_directory_symlink(tmp.File("evil"), run_path);

  REQUIRE(run->MakeDirs("attempt_1/0").ok());
  auto log = run->OpenFile("attempt_1/0/stdout.log", O_WRONLY | O_CREAT | O_TRUNC);
  REQUIRE(log.ok());
  REQUIRE(::write(log->get(), "line\n", 5) == 5);
  REQUIRE(run->WriteFile("attempt_1/0/error.json", "{}\n").ok());
  CHECK(ReadFile(run_path + ".moved/attempt_1/0/stdout.log") == "line\n");
  CHECK(ReadFile(run_path + ".moved/attempt_1/0/error.json") == "{}\n");
  CHECK(fs::is_empty(tmp.File("evil")));
  CHECK(run->PathOf("attempt_1/0/stdout.log") == run_path + "/attempt_1/0/stdout.log");
}

TEST_CASE("held dir: a link below it is never followed", "[held_dir]") {
  TempDir tmp;
  auto dir = sys::HeldDir::Open(tmp.path());
  REQUIRE(dir.ok());
  fs::create_directory(tmp.File("elsewhere"));
  fs::create_directory_symlink(tmp.File("elsewhere"), tmp.File("attempt_0"));
  fs::create_symlink(tmp.File("target"), tmp.File("events.jsonl"));

  const Status made = dir->MakeDirs("attempt_0/1");
  REQUIRE_FALSE(made.ok());
  CHECK(made.error().what.find("cannot open " + tmp.File("attempt_0/1") + " (at 'attempt_0')") ==
        0);
  auto file = dir->OpenFile("events.jsonl", O_WRONLY | O_CREAT | O_APPEND);
  REQUIRE_FALSE(file.ok());
  CHECK(file.error().what.find("symbolic link") != std::string::npos);
  CHECK_FALSE(fs::exists(tmp.File("target")));
  CHECK(fs::is_empty(tmp.File("elsewhere")));
  // WriteFile replaces a link by its own file (rename), never writes through it.
  REQUIRE(dir->WriteFile("events.jsonl", "x").ok());
  CHECK_FALSE(fs::is_symlink(tmp.File("events.jsonl")));
  CHECK_FALSE(fs::exists(tmp.File("target")));
}

TEST_CASE("held dir: a path through a link is resolved once, when it is opened", "[held_dir]") {
  TempDir tmp;
  fs::create_directory(tmp.File("real"));
  fs::create_directory_symlink(tmp.File("real"), tmp.File("alias"));
  auto dir = sys::HeldDir::Open(tmp.File("alias/logs"));
  REQUIRE(dir.ok());
  REQUIRE(dir->WriteFile("a", "1").ok());
  CHECK(ReadFile(tmp.File("real/logs/a")) == "1");
  CHECK(dir->PathOf() == tmp.File("alias/logs"));  // shown as given

  testing::WriteFile(tmp.File("file"), "");
  auto not_dir = sys::HeldDir::Open(tmp.File("file/logs"));
  REQUIRE_FALSE(not_dir.ok());
  CHECK(not_dir.error().what.find("cannot open " + tmp.File("file/logs")) == 0);
}

TEST_CASE("foreign writer: components others may change are named, sticky and own ones pass",
          "[held_dir]") {
  TempDir tmp;
  const uid_t me = ::geteuid();
  fs::create_directories(tmp.File("a/b"));
  CHECK_FALSE(sys::FindForeignWriter(tmp.File("a/b/not/yet/made"), me));
  CHECK_FALSE(sys::FindForeignWriter("/tmp", me));  // sticky

  fs::permissions(tmp.File("a"), fs::perms::all);  // 0777, not sticky
  CHECK(sys::FindForeignWriter(tmp.File("a/b"), me) ==
        tmp.File("a") + " is writable by other users and not sticky (mode 0777)");
  fs::permissions(tmp.File("a"), fs::perms::all | fs::perms::sticky_bit);
  CHECK_FALSE(sys::FindForeignWriter(tmp.File("a/b"), me));

  // Group-writable counts too, unless the group is root's.
  REQUIRE(::chown(tmp.File("a").c_str(), me, kOther) == 0);
  fs::permissions(tmp.File("a"), fs::perms::owner_all | fs::perms::group_all);
  CHECK(sys::FindForeignWriter(tmp.File("a/b"), me) ==
        tmp.File("a") + " is writable by other users and not sticky (mode 0770)");
  REQUIRE(::chown(tmp.File("a").c_str(), me, 0) == 0);
  CHECK_FALSE(sys::FindForeignWriter(tmp.File("a/b"), me));

  REQUIRE(::chown(tmp.File("a/b").c_str(), kOther, kOther) == 0);
  CHECK(sys::FindForeignWriter(tmp.File("a/b"), me) ==
        tmp.File("a/b") + " is owned by another user (uid 65534)");
  // The job's own user may own it.
  CHECK_FALSE(sys::FindForeignWriter(tmp.File("a/b"), kOther));
}

TEST_CASE("foreign writer: a link is followed, and the directory holding it is checked",
          "[held_dir]") {
  TempDir tmp;
  const uid_t me = ::geteuid();
  fs::create_directories(tmp.File("shared"));
  fs::create_directories(tmp.File("private/logs"));
  fs::create_directory_symlink(tmp.File("private/logs"), tmp.File("shared/link"));
  CHECK_FALSE(sys::FindForeignWriter(tmp.File("shared/link"), me));
  // Whoever may rename entries of `shared` may swap the link.
  fs::permissions(tmp.File("shared"), fs::perms::all);
  CHECK(sys::FindForeignWriter(tmp.File("shared/link"), me) ==
        tmp.File("shared") + " is writable by other users and not sticky (mode 0777)");
  // A target another user owns, reached through an innocent link.
  fs::create_directory_symlink(tmp.File("shared"), tmp.File("private/to-shared"));
  CHECK(sys::FindForeignWriter(tmp.File("private/to-shared/x"), me).has_value());
  // A loop ends the walk with a message.
  fs::create_directory_symlink(tmp.File("private/loop"), tmp.File("private/loop"));
  CHECK(sys::FindForeignWriter(tmp.File("private/loop"), me) ==
        tmp.File("private/loop") + ": too many levels of symbolic links");
}

TEST_CASE("private runtime dir: XDG_RUNTIME_DIR only when it is the user's alone", "[held_dir]") {
  TempDir tmp;
  const uid_t me = ::geteuid();
  CHECK(sys::PrivateRuntimeDir(tmp.path() + "/", me) == tmp.path());
  CHECK(sys::PrivateRuntimeDir("", me).empty());
  CHECK(sys::PrivateRuntimeDir("relative", me).empty());
  CHECK(sys::PrivateRuntimeDir(tmp.path(), kOther).empty());
  fs::permissions(tmp.path(), fs::perms::owner_all | fs::perms::group_write);
  CHECK(sys::PrivateRuntimeDir(tmp.path(), me).empty());
}

}  // namespace gculaunch
