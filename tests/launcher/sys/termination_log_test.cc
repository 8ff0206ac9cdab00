#include "launcher/sys/termination_log.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "tests/support/test_util.h"

namespace gculaunch {
namespace {

using testing::ReadFile;
using testing::TempDir;

TEST_CASE("termination log: the existing file is truncated and written in place", "[term]") {
  TempDir dir;
  const std::string path = dir.Write("termination-log", std::string(9000, 'z'));
  struct stat before {};
  REQUIRE(::stat(path.c_str(), &before) == 0);
  REQUIRE(sys::WriteTerminationLog(path, "gculaunch: exit 80 (retry)\n").ok());
  CHECK(ReadFile(path) == "gculaunch: exit 80 (retry)\n");
  struct stat after {};
  REQUIRE(::stat(path.c_str(), &after) == 0);
  CHECK(after.st_ino == before.st_ino);  // the same file: a bind mount's target stays
}

TEST_CASE("termination log: a link, a FIFO, a directory or a missing file is refused", "[term]") {
  TempDir dir;
  const std::string victim = dir.Write("victim", "keep\n");
  const std::string link = dir.File("link");
  REQUIRE(::symlink(victim.c_str(), link.c_str()) == 0);
  auto through = sys::WriteTerminationLog(link, "x");
  REQUIRE_FALSE(through.ok());
  CHECK(through.error().what ==
        "--termination-log " + link + ": is a symbolic link; not written through it");
  CHECK(ReadFile(victim) == "keep\n");
  const std::string fifo = dir.File("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // O_NONBLOCK: no reader, so the open fails at once (ENXIO) instead of blocking.
  CHECK_FALSE(sys::WriteTerminationLog(fifo, "x").ok());
  auto folder = sys::WriteTerminationLog(dir.path(), "x");
  REQUIRE_FALSE(folder.ok());
  auto missing = sys::WriteTerminationLog(dir.File("missing"), "x");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().what.find("No such file or directory") != std::string::npos);
}

TEST_CASE("termination log: an explicit path wins, none turns it off", "[term]") {
  CHECK(sys::ChooseTerminationLog("none").empty());
  CHECK(sys::ChooseTerminationLog("/some/file") == "/some/file");
}

}  // namespace
}  // namespace gculaunch
