#include "launcher/sys/torch_probe.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

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
  spec.executable = python;
  spec.argv = {python, "-u", script};
  return spec;
}

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

}  // namespace

TEST_CASE("torch cache: an entry survives its text", "[torch_probe]") {
  TempDir tmp;
  const sys::TorchCacheEntry entry = Entry(tmp);
  CHECK(entry.checks[2].second == "absent");
  const auto parsed = sys::ParseTorchCacheEntry(sys::FormatTorchCacheEntry(entry));
  REQUIRE(parsed.has_value());
  CHECK(parsed->key == entry.key);
  CHECK(parsed->found);
  CHECK(parsed->version == "2.6.0");
  CHECK(parsed->version_file == entry.version_file);
  CHECK(parsed->checks == entry.checks);
  CHECK_FALSE(sys::ParseTorchCacheEntry("").has_value());
  CHECK_FALSE(sys::ParseTorchCacheEntry("gculaunch torch cache 1\nkey zz\nfound 0\n").has_value());
  CHECK_FALSE(sys::ParseTorchCacheEntry("gculaunch torch cache 1\nfound 0\n").has_value());
  CHECK(sys::ParseTorchCacheEntry("gculaunch torch cache 1\nkey 6b\nfound 0\n").has_value());
}

TEST_CASE("torch cache: hit, miss on another key, miss when a checked file changed",
          "[torch_probe]") {
  TempDir tmp;
  const sys::TorchCacheEntry entry = Entry(tmp);
  const std::string dir = tmp.File("cache/gculaunch");
  REQUIRE(sys::WriteTorchCacheFile(dir, entry).ok());
  const std::string file = sys::TorchCacheFile(dir, entry.key);
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(::stat(dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);

  const auto hit = sys::ReadTorchCacheFile(file, entry.key, ::geteuid());
  REQUIRE(hit.has_value());
  CHECK(hit->version == "2.6.0");
  CHECK_FALSE(sys::ReadTorchCacheFile(file, "another key", ::geteuid()).has_value());
  CHECK(sys::TorchCacheFile(dir, "another key") != file);

  SECTION("version.py rewritten (an upgrade)") {
    // Another size: two writes within one clock tick may share their mtime.
    tmp.Write("torch/version.py", "__version__ = '2.10.0'\n");
    CHECK_FALSE(sys::ReadTorchCacheFile(file, entry.key, ::geteuid()).has_value());
  }
  SECTION("a torch that shadows it on the search path") {
    tmp.Write("sp/torch.py");
    CHECK_FALSE(sys::ReadTorchCacheFile(file, entry.key, ::geteuid()).has_value());
  }
  SECTION("a search path entry that appeared") {
    tmp.Write("missing/torch/version.py", "__version__ = '9.9'\n");
    CHECK_FALSE(sys::ReadTorchCacheFile(file, entry.key, ::geteuid()).has_value());
  }
}

TEST_CASE("torch cache: a file that someone else could have written is ignored", "[torch_probe]") {
  TempDir tmp;
  const sys::TorchCacheEntry entry = Entry(tmp);
  const std::string dir = tmp.File("cache");
  REQUIRE(sys::WriteTorchCacheFile(dir, entry).ok());
  const std::string file = sys::TorchCacheFile(dir, entry.key);
  REQUIRE(sys::ReadTorchCacheFile(file, entry.key, ::geteuid()).has_value());

  SECTION("owned by another user") {
    CHECK_FALSE(sys::ReadTorchCacheFile(file, entry.key, ::geteuid() + 1).has_value());
  }
  SECTION("group-writable") {
    REQUIRE(::chmod(file.c_str(), 0620) == 0);
    CHECK_FALSE(sys::ReadTorchCacheFile(file, entry.key, ::geteuid()).has_value());
  }
  SECTION("world-writable") {
    REQUIRE(::chmod(file.c_str(), 0602) == 0);
    CHECK_FALSE(sys::ReadTorchCacheFile(file, entry.key, ::geteuid()).has_value());
  }
  SECTION("a symlink to a good file") {
    const std::string link = sys::TorchCacheFile(dir, "linked");
    REQUIRE(::symlink(file.c_str(), link.c_str()) == 0);
    CHECK_FALSE(sys::ReadTorchCacheFile(link, entry.key, ::geteuid()).has_value());
  }
}

TEST_CASE("torch cache: pruned to the newest entries", "[torch_probe]") {
  TempDir tmp;
  sys::TorchCacheEntry entry = Entry(tmp);
  const std::string dir = tmp.File("cache");
  std::vector<std::string> files;
  for (const char* key : {"a", "b", "c"}) {
    entry.key = key;
    REQUIRE(sys::WriteTorchCacheFile(dir, entry).ok());
    files.push_back(sys::TorchCacheFile(dir, key));
    // Distinct mtimes, oldest first.
    const struct timespec times[2] = {{0, UTIME_OMIT}, {1000 + static_cast<long>(files.size()), 0}};
    REQUIRE(::utimensat(AT_FDCWD, files.back().c_str(), times, 0) == 0);
  }
  tmp.Write("cache/not-an-entry");
  sys::PruneTorchCache(dir, 2);
  CHECK(::access(files[0].c_str(), F_OK) != 0);
  CHECK(::access(files[1].c_str(), F_OK) == 0);
  CHECK(::access(files[2].c_str(), F_OK) == 0);
  CHECK(::access(tmp.File("cache/not-an-entry").c_str(), F_OK) == 0);
}

TEST_CASE("torch cache: the directory is used only when nobody else can change it",
          "[torch_probe]") {
  TempDir tmp;
  const std::string home = tmp.File("home");
  REQUIRE(::mkdir(home.c_str(), 0700) == 0);
  CHECK(sys::TorchCacheDir(EnvMap{{"HOME", home}}, ::geteuid()) ==
        home + "/.cache/gculaunch/torch-versions");
  CHECK(sys::TorchCacheDir(EnvMap{{"HOME", home}, {"XDG_CACHE_HOME", home + "/xdg"}},
                           ::geteuid()) == home + "/xdg/gculaunch/torch-versions");
  CHECK(sys::TorchCacheDir(EnvMap{{"HOME", home}, {"XDG_CACHE_HOME", "relative"}}, ::geteuid()) ==
        home + "/.cache/gculaunch/torch-versions");
  CHECK_FALSE(sys::TorchCacheDir(EnvMap{}, ::geteuid()).has_value());
  REQUIRE(::chmod(home.c_str(), 0777) == 0);
  std::string why;
  CHECK_FALSE(sys::TorchCacheDir(EnvMap{{"HOME", home}}, ::geteuid(), &why).has_value());
  CHECK(why.find("writable by other users") != std::string::npos);
}

TEST_CASE("torch probe: the version without importing torch, then from the cache",
          "[torch_probe]") {
  REQUIRE(::access(kPython, X_OK) == 0);  // CI: Debian's python3 (torch 1.13)
  TempDir tmp;
  const std::string site = FakeTorch(tmp, "2.6.0");
  const std::string script = tmp.Write("job/train.py", "print('hi')\n");
  const LaunchSpec spec = PythonSpec(kPython, script);
  const EnvMap env{{"PATH", "/usr/bin:/bin"}, {"PYTHONPATH", site}};
  sys::TorchProbeOptions options;
  options.cache_dir = tmp.File("cache");
  options.uid = ::geteuid();

  sys::TorchProbe first = sys::TorchProbe::Start(spec, env, options);
  CHECK_FALSE(first.answered());
  const RanksTorch found = first.Finish();
  INFO(found.how);
  CHECK(found.state == RanksTorch::State::kFound);
  CHECK(found.version == "2.6.0");
  CHECK(found.how == std::string("found by running ") + kPython + " once; cached");

  sys::TorchProbe second = sys::TorchProbe::Start(spec, env, options);
  CHECK(second.answered());
  const RanksTorch cached = second.Finish();
  CHECK(cached.version == "2.6.0");
  CHECK(cached.how.rfind("from the cache", 0) == 0);

  // An upgrade in place is seen at once.
  tmp.Write("site/torch/version.py", "__version__ = '2.10.1'\n");
  sys::TorchProbe third = sys::TorchProbe::Start(spec, env, options);
  CHECK_FALSE(third.answered());
  CHECK(third.Finish().version == "2.10.1");

  // Another PYTHONPATH is another question.
  const EnvMap bare{{"PATH", "/usr/bin:/bin"}, {"PYTHONPATH", tmp.File("nothing")}};
  sys::TorchProbe other = sys::TorchProbe::Start(spec, bare, options);
  CHECK_FALSE(other.answered());
  CHECK(other.Finish().version != "2.10.1");
}

TEST_CASE("torch probe: the script's directory is searched as in the rank", "[torch_probe]") {
  REQUIRE(::access(kPython, X_OK) == 0);  // CI: Debian's python3 (torch 1.13)
  TempDir tmp;
  tmp.Write("job/torch/__init__.py", "raise RuntimeError('imported')\n");
  tmp.Write("job/torch/version.py", "__version__ = '2.3.0'\n");
  const LaunchSpec spec = PythonSpec(kPython, tmp.Write("job/train.py"));
  const RanksTorch torch =
      sys::TorchProbe::Start(spec, EnvMap{{"PATH", "/usr/bin:/bin"}}, {}).Finish();
  INFO(torch.how);
  CHECK(torch.version == "2.3.0");
  CHECK(torch.how == std::string("found by running ") + kPython + " once");
}

TEST_CASE("torch probe: a failure is an unknown version, never an error", "[torch_probe]") {
  // (and an answer that could not be checked later is not cached)
  TempDir tmp;
  sys::TorchProbeOptions options;
  options.timeout_s = 0.5;
  options.cache_dir = tmp.File("cache");
  options.uid = ::geteuid();

  SECTION("an interpreter that hangs is stopped at the bound") {
    const std::string slow = tmp.Write("slow", "#!/bin/sh\nsleep 30\n");
    REQUIRE(::chmod(slow.c_str(), 0755) == 0);
    const auto started = std::chrono::steady_clock::now();
    const RanksTorch torch = sys::TorchProbe::Start(PythonSpec(slow, "x.py"), {}, options).Finish();
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
    CHECK(torch.state == RanksTorch::State::kUnknown);
    CHECK(torch.how == slow + " did not answer within 0.5 s");
  }
  SECTION("an interpreter that does not exist") {
    const RanksTorch torch =
        sys::TorchProbe::Start(PythonSpec(tmp.File("nope"), "x.py"), {}, options).Finish();
    CHECK(torch.state == RanksTorch::State::kUnknown);
    CHECK(torch.how.find("cannot run") != std::string::npos);
  }
  SECTION("an interpreter that says something else") {
    const std::string odd = tmp.Write("odd", "#!/bin/sh\necho hello\n");
    REQUIRE(::chmod(odd.c_str(), 0755) == 0);
    const RanksTorch torch = sys::TorchProbe::Start(PythonSpec(odd, "x.py"), {}, options).Finish();
    CHECK(torch.state == RanksTorch::State::kUnknown);
  }
  SECTION("an interpreter that sees other files (a chroot) is answered but not cached") {
    const std::string chrooted = tmp.Write(
        "chrooted",
        "#!/bin/sh\ncat <<'EOF'\ngculaunch-torch-probe: {\"version_file\": "
        "\"/v/torch/version.py\", \"version_text\": \"__version__ = '2.6.0'\", \"checks\": "
        "[[\"/v/torch/version.py\", \"1:2:3:4:5\"]]}\nEOF\n");
    REQUIRE(::chmod(chrooted.c_str(), 0755) == 0);
    const RanksTorch torch =
        sys::TorchProbe::Start(PythonSpec(chrooted, "x.py"), {}, options).Finish();
    CHECK(torch.state == RanksTorch::State::kFound);
    CHECK(torch.version == "2.6.0");
    CHECK(torch.how == "found by running " + chrooted +
                           " once; not cached: it does not see /v/torch/version.py as gculaunch "
                           "does");
  }
  SECTION("--no-python asks nobody") {
    LaunchSpec spec = PythonSpec("", "x.py");
    spec.argv = {"/bin/true"};
    sys::TorchProbe probe = sys::TorchProbe::Start(spec, {}, options);
    CHECK(probe.answered());
    const RanksTorch torch = probe.Finish();
    CHECK(torch.state == RanksTorch::State::kNotProbed);
    CHECK(torch.how == "--no-python");
  }
  // Nothing unknown or unusable is cached.
  CHECK(::access(options.cache_dir.c_str(), F_OK) != 0);
}

}  // namespace gculaunch
