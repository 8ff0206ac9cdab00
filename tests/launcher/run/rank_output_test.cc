#include "launcher/run/rank_output.h"

#include <unistd.h>

#include <catch2/catch.hpp>

#include "tests/support/test_util.h"

namespace gculaunch {
namespace {

struct Fixture {
  Fixture() : flow(io), writer({}, flow.SpaceCallback()) {
    console = *OutputTarget::File(dir.File("console"));
    log = *OutputTarget::File(dir.File("log"));
  }
  std::string Console() {
    writer.Finish(std::chrono::seconds(10));
    return testing::ReadFile(dir.File("console"));
  }
  testing::TempDir dir;
  boost::asio::io_context io;
  OutputFlow flow;
  OutputWriter writer;
  TargetPtr console, log;
};

void WriteAll(int fd, const std::string& text) {
  REQUIRE(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
}

}  // namespace

TEST_CASE("a stream prefixes whole lines, logs raw bytes, keeps a tail", "[rank_output]") {
  Fixture f;
  auto pipe = sys::MakePipe("test");
  REQUIRE(pipe.ok());
  LineTail tail(2);
  bool closed = false;
  auto stream = RankStream::Start(f.io, std::move(pipe->read),
                                  StreamRoute{f.console, "[rank7]: ", f.log, &tail}, f.writer,
                                  f.flow, [&] { closed = true; });
  WriteAll(pipe->write.get(), "one\ntw");
  WriteAll(pipe->write.get(), "o\r\nthree\nfour");
  pipe->write.Reset();  // EOF: the partial "four" is flushed
  REQUIRE(testing::RunUntil(f.io, [&] { return closed; }));
  CHECK(stream->closed());
  CHECK(tail.lines() == std::vector<std::string>{"three", "four"});
  f.writer.Finish(std::chrono::seconds(10));
  CHECK(testing::ReadFile(f.dir.File("console")) ==
        "[rank7]: one\n[rank7]: two\n[rank7]: three\n[rank7]: four\n");
  CHECK(testing::ReadFile(f.dir.File("log")) == "one\ntwo\r\nthree\nfour");
}

TEST_CASE("a stream not routed to the console still logs", "[rank_output]") {
  Fixture f;
  auto pipe = sys::MakePipe("test");
  REQUIRE(pipe.ok());
  bool closed = false;
  RankStream::Start(f.io, std::move(pipe->read), StreamRoute{nullptr, "[rank0]: ", f.log}, f.writer,
                    f.flow, [&] { closed = true; });
  WriteAll(pipe->write.get(), "hidden\n");
  pipe->write.Reset();
  REQUIRE(testing::RunUntil(f.io, [&] { return closed; }));
  CHECK(f.Console().empty());
  CHECK(testing::ReadFile(f.dir.File("log")) == "hidden\n");
}

TEST_CASE("Close() stops reading and flushes the partial line once", "[rank_output]") {
  Fixture f;
  auto pipe = sys::MakePipe("test");
  REQUIRE(pipe.ok());
  int closed = 0;
  auto stream = RankStream::Start(
      f.io, std::move(pipe->read),
      StreamRoute{f.console, "[rank1]: ", nullptr, nullptr, std::chrono::milliseconds(60000)},
      f.writer, f.flow, [&] { ++closed; });
  WriteAll(pipe->write.get(), "done\nhalf");
  // One handler: the read of both lines (the data is already in the pipe).
  REQUIRE(f.io.run_one() == 1);
  stream->Close();
  stream->Close();
  CHECK(closed == 1);
  CHECK(f.Console() == "[rank1]: done\n[rank1]: half\n");
}

}  // namespace gculaunch
