#include "launcher/run/progress_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <string>

#include "tests/support/test_util.h"

namespace gculaunch {
namespace {

// Reads `path` once and runs the io_context until the answer came.
ProgressReading ReadOnce(const std::string& path,
                         std::chrono::milliseconds bound = ProgressFile::kBound) {
  boost::asio::io_context io;
  ProgressFile file(io, path, bound);
  std::optional<ProgressReading> got;
  file.Read([&got](ProgressReading r) { got = std::move(r); });
  REQUIRE(testing::RunUntil(io, [&got] { return got.has_value(); }));
  return *got;
}

}  // namespace

TEST_CASE("progress file: the number is the first word, a whole number >= 0", "[progress_file]") {
  CHECK(ParseProgress("1200") == 1200);
  CHECK(ParseProgress("  1200\n") == 1200);
  CHECK(ParseProgress("7 steps done\n") == 7);
  CHECK(ParseProgress("0") == 0);
  CHECK(ParseProgress("9223372036854775807") == INT64_MAX);
  CHECK_FALSE(ParseProgress(""));
  CHECK_FALSE(ParseProgress("\n"));
  CHECK_FALSE(ParseProgress("-3"));
  CHECK_FALSE(ParseProgress("step 12"));
  CHECK_FALSE(ParseProgress("12.5"));
  CHECK_FALSE(ParseProgress("99999999999999999999"));
}

TEST_CASE("progress file: read off the loop, every kind of file answered", "[progress_file]") {
  testing::TempDir dir;
  CHECK(ReadOnce(dir.Write("step", "42\n")).value == 42);

  ProgressReading none = ReadOnce(dir.File("missing"));
  CHECK_FALSE(none.value);
  CHECK(none.note == "there is no file " + dir.File("missing"));

  ProgressReading words = ReadOnce(dir.Write("words", "hello"));
  CHECK_FALSE(words.value);
  CHECK(words.note == dir.File("words") + " holds no whole number >= 0");

  REQUIRE(::symlink(dir.File("step").c_str(), dir.File("link").c_str()) == 0);
  ProgressReading link = ReadOnce(dir.File("link"));
  CHECK_FALSE(link.value);
  CHECK(link.note ==
        "'" + dir.File("link") + "' is a symbolic link (gculaunch does not follow one there)");

  // A FIFO nobody writes: not waited on (O_NONBLOCK), refused as not a regular file.
  REQUIRE(::mkfifo(dir.File("fifo").c_str(), 0600) == 0);
  ProgressReading fifo = ReadOnce(dir.File("fifo"));
  CHECK_FALSE(fifo.value);
  CHECK(fifo.note == "'" + dir.File("fifo") + "' is a FIFO, not a regular file");

  ProgressReading big = ReadOnce(dir.Write("big", "1" + std::string(kMaxProgressFileBytes, ' ')));
  CHECK_FALSE(big.value);
  CHECK(big.note == "'" + dir.File("big") + "' is larger than 4096 bytes");
}

TEST_CASE("progress file: a newer read abandons the one before, and the reader may go first",
          "[progress_file]") {
  testing::TempDir dir;
  const std::string path = dir.Write("step", "5");
  boost::asio::io_context io;
  int first = 0;
  std::optional<ProgressReading> second;
  {
    ProgressFile file(io, path);
    file.Read([&first](ProgressReading) { ++first; });
    file.Read([&second](ProgressReading r) { second = std::move(r); });
    REQUIRE(testing::RunUntil(io, [&second] { return second.has_value(); }));
    CHECK(second->value == 5);
    file.Read([&first](ProgressReading) { ++first; });
  }  // destroyed with a read under way: its answer must not run
  io.restart();
  io.run_for(std::chrono::milliseconds(300));
  CHECK(first == 0);
}

}  // namespace gculaunch
