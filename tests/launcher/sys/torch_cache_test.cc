#include "launcher/sys/torch_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/support/test_util.h"

namespace gculaunch {
namespace {

using testing::TempDir;

sys::TorchCacheEntry Entry(const TempDir& tmp) {
  sys::TorchCacheEntry entry;
  entry.key = "the key\nwith two lines";
  entry.found = true;
  entry.version = "2.6.0";
  entry.version_file = tmp.Write("torch/version.py", "__version__ = '2.6.0'\n");
  tmp.Write("sp/other.py");
  entry.checks = {{entry.version_file, sys::FileSignature(entry.version_file)},
                  {tmp.File("sp"), sys::FileSignature(tmp.File("sp"))},
                  {tmp.File("missing"), sys::FileSignature(tmp.File("missing"))}};
  return entry;
}

// The cache below tmp/xdg (XDG_CACHE_HOME), made.
sys::TorchCacheDir Made(const TempDir& tmp) {
  auto dir =
      sys::TorchCacheDir::Open(EnvMap{{"XDG_CACHE_HOME", tmp.File("xdg")}}, ::geteuid(), true);
  if (!dir.ok()) FAIL(dir.error().what);
  return std::move(*dir);
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

}  // namespace

TEST_CASE("torch cache: an entry survives its text", "[torch_cache]") {
  TempDir tmp;
  sys::TorchCacheEntry entry = Entry(tmp);
  entry.executable = "/home/u/.pyenv/versions/3.11.7/bin/python3";
  entry.pyenv_version = "3.11.7";
  CHECK(entry.checks[2].second == "absent");
  const std::string text = sys::FormatTorchCacheEntry(entry);
  CHECK(text.rfind(sys::kTorchCacheMarker, 0) == 0);
  const auto parsed = sys::ParseTorchCacheEntry(text);
  REQUIRE(parsed.has_value());
  CHECK(parsed->key == entry.key);
  CHECK(parsed->found);
  CHECK(parsed->version == "2.6.0");
  CHECK(parsed->version_file == entry.version_file);
  CHECK(parsed->checks == entry.checks);
  CHECK(parsed->executable == entry.executable);
  CHECK(parsed->pyenv_version == "3.11.7");
  CHECK_FALSE(sys::ParseTorchCacheEntry("").has_value());
  CHECK_FALSE(sys::ParseTorchCacheEntry("gculaunch torch cache 2\nkey zz\nfound 0\n").has_value());
  CHECK_FALSE(sys::ParseTorchCacheEntry("gculaunch torch cache 2\nfound 0\n").has_value());
  CHECK(sys::ParseTorchCacheEntry("gculaunch torch cache 2\nkey 6b\nfound 0\n").has_value());
  // Format 1 had no interpreter: a miss, never a wrong answer.
  CHECK_FALSE(sys::ParseTorchCacheEntry("gculaunch torch cache 1\nkey 6b\nfound 0\n").has_value());
}

TEST_CASE("torch cache: hit, miss on another key, miss when a checked file changed",
          "[torch_cache]") {
  TempDir tmp;
  const sys::TorchCacheEntry entry = Entry(tmp);
  const sys::TorchCacheDir dir = Made(tmp);
  CHECK(dir.path() == tmp.File("xdg/gculaunch/torch-versions"));
  REQUIRE(dir.Write(entry).ok());
  const std::string file = dir.path() + "/" + sys::TorchCacheDir::FileName(entry.key);
  CHECK(ModeOf(file) == 0600);
  CHECK(ModeOf(dir.path()) == 0700);
  CHECK(ModeOf(tmp.File("xdg/gculaunch")) == 0700);

  const auto hit = dir.Read(entry.key);
  REQUIRE(hit.has_value());
  CHECK(hit->version == "2.6.0");
  CHECK_FALSE(dir.Read("another key").has_value());
  CHECK(sys::TorchCacheDir::FileName("another key") != sys::TorchCacheDir::FileName(entry.key));

  SECTION("version.py rewritten (an upgrade)") {
    // Another size: two writes within one clock tick may share their mtime.
    tmp.Write("torch/version.py", "__version__ = '2.10.0'\n");
    CHECK_FALSE(dir.Read(entry.key).has_value());
  }
  SECTION("a torch that shadows it on the search path") {
    tmp.Write("sp/torch.py");
    CHECK_FALSE(dir.Read(entry.key).has_value());
  }
  SECTION("a search path entry that appeared") {
    tmp.Write("missing/torch/version.py", "__version__ = '9.9'\n");
    CHECK_FALSE(dir.Read(entry.key).has_value());
  }
  SECTION("opened again without creating, it is found") {
    auto again =
        sys::TorchCacheDir::Open(EnvMap{{"XDG_CACHE_HOME", tmp.File("xdg")}}, ::geteuid(), false);
    REQUIRE(again.ok());
    CHECK(again->Read(entry.key).has_value());
  }
}

TEST_CASE("torch cache: an entry someone else could have written is ignored", "[torch_cache]") {
  TempDir tmp;
  const sys::TorchCacheEntry entry = Entry(tmp);
  const sys::TorchCacheDir dir = Made(tmp);
  REQUIRE(dir.Write(entry).ok());
  const std::string file = dir.path() + "/" + sys::TorchCacheDir::FileName(entry.key);
  REQUIRE(dir.Read(entry.key).has_value());

  SECTION("group-writable") {
    REQUIRE(::chmod(file.c_str(), 0620) == 0);
    CHECK_FALSE(dir.Read(entry.key).has_value());
  }
  SECTION("world-writable") {
    REQUIRE(::chmod(file.c_str(), 0602) == 0);
    CHECK_FALSE(dir.Read(entry.key).has_value());
  }
  SECTION("a symlink to a good file") {
    const std::string other = tmp.Write("elsewhere", testing::ReadFile(file));
    REQUIRE(::unlink(file.c_str()) == 0);
    REQUIRE(::symlink(other.c_str(), file.c_str()) == 0);
    CHECK_FALSE(dir.Read(entry.key).has_value());
  }
}

TEST_CASE("torch cache: the directory is walked one held component at a time", "[torch_cache]") {
  TempDir tmp;
  const uid_t me = ::geteuid();
  auto open = [&](const std::string& xdg, bool create) {
    return sys::TorchCacheDir::Open(EnvMap{{"XDG_CACHE_HOME", xdg}, {"HOME", tmp.File("home")}}, me,
                                    create);
  };
  SECTION("missing: not made without create") {
    const auto dir = open(tmp.File("xdg"), false);
    REQUIRE_FALSE(dir.ok());
    CHECK(dir.error().what == tmp.File("xdg") + " does not exist yet");
    CHECK(::access(tmp.File("xdg").c_str(), F_OK) != 0);
  }
  SECTION("XDG_CACHE_HOME relative or unset: HOME/.cache") {
    REQUIRE(::mkdir(tmp.File("home").c_str(), 0700) == 0);
    const auto dir = open("relative", true);
    REQUIRE(dir.ok());
    CHECK(dir->path() == tmp.File("home/.cache/gculaunch/torch-versions"));
    CHECK(::access(tmp.File("home/.cache/gculaunch/torch-versions").c_str(), F_OK) == 0);
    CHECK_FALSE(sys::TorchCacheDir::Open(EnvMap{}, me, true).ok());
  }
  SECTION("a user's own link on the way is followed") {
    REQUIRE(::mkdir(tmp.File("real").c_str(), 0700) == 0);
    REQUIRE(::symlink("real", tmp.File("link").c_str()) == 0);
    const auto dir = open(tmp.File("link/cache"), true);
    REQUIRE(dir.ok());
    CHECK(::access(tmp.File("real/cache/gculaunch/torch-versions").c_str(), F_OK) == 0);
  }
  SECTION("gculaunch's own directories may not be links") {
    REQUIRE(::mkdir(tmp.File("xdg").c_str(), 0700) == 0);
    REQUIRE(::mkdir(tmp.File("other").c_str(), 0700) == 0);
    REQUIRE(::symlink(tmp.File("other").c_str(), tmp.File("xdg/gculaunch").c_str()) == 0);
    const auto dir = open(tmp.File("xdg"), true);
    REQUIRE_FALSE(dir.ok());
    CHECK(dir.error().what ==
          tmp.File("xdg/gculaunch") + " is a symbolic link (gculaunch never follows one here)");
    CHECK(::access(tmp.File("other/torch-versions").c_str(), F_OK) != 0);
  }
  SECTION("a directory others may write is refused, and nothing is made below it") {
    REQUIRE(::mkdir(tmp.File("shared").c_str(), 0777) == 0);
    REQUIRE(::chmod(tmp.File("shared").c_str(), 0777) == 0);
    const auto dir = open(tmp.File("shared/cache"), true);
    REQUIRE_FALSE(dir.ok());
    CHECK(dir.error().what ==
          tmp.File("shared") + " is writable by other users and not sticky (mode 0777)");
    CHECK(::access(tmp.File("shared/cache").c_str(), F_OK) != 0);
  }
  SECTION("gculaunch's own directory must be the user's alone") {
    REQUIRE(::mkdir(tmp.File("xdg").c_str(), 0700) == 0);
    REQUIRE(::mkdir(tmp.File("xdg/gculaunch").c_str(), 0700) == 0);
    REQUIRE(::chmod(tmp.File("xdg/gculaunch").c_str(), 0770) == 0);
    const auto dir = open(tmp.File("xdg"), true);
    REQUIRE_FALSE(dir.ok());
    CHECK(dir.error().what ==
          tmp.File("xdg/gculaunch") + " is writable by other users (mode 0770)");
  }
  SECTION("a directory of another user is refused (as another uid would see it)") {
    REQUIRE(open(tmp.File("xdg"), true).ok());
    const auto theirs =
        sys::TorchCacheDir::Open(EnvMap{{"XDG_CACHE_HOME", tmp.File("xdg")}}, me + 1, false);
    REQUIRE_FALSE(theirs.ok());
    CHECK(theirs.error().what.find("is owned by") != std::string::npos);
  }
}

TEST_CASE("torch cache: pruned to the newest entries, only gculaunch's own", "[torch_cache]") {
  TempDir tmp;
  sys::TorchCacheEntry entry = Entry(tmp);
  const sys::TorchCacheDir dir = Made(tmp);
  std::vector<std::string> files;
  auto age = [](const std::string& file, long seconds) {
    const struct timespec times[2] = {{0, UTIME_OMIT}, {seconds, 0}};
    REQUIRE(::utimensat(AT_FDCWD, file.c_str(), times, 0) == 0);
  };
  for (const char* key : {"a", "b", "c"}) {
    entry.key = key;
    REQUIRE(dir.Write(entry).ok());
    files.push_back(dir.path() + "/" + sys::TorchCacheDir::FileName(key));
    age(files.back(), 1000 + static_cast<long>(files.size()));  // oldest first
  }
  // A file of the user's with an entry's name but not gculaunch's marker, older than all.
  const std::string foreign = dir.path() + "/0123456789abcdef";
  testing::WriteFile(foreign, "not a cache entry\n");
  age(foreign, 10);
  const std::string other = tmp.Write("xdg/gculaunch/torch-versions/not-an-entry");
  dir.Prune(2);
  CHECK(::access(files[0].c_str(), F_OK) != 0);
  CHECK(::access(files[1].c_str(), F_OK) == 0);
  CHECK(::access(files[2].c_str(), F_OK) == 0);
  CHECK(::access(foreign.c_str(), F_OK) == 0);
  CHECK(::access(other.c_str(), F_OK) == 0);
}

}  // namespace gculaunch
