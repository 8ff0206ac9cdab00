#include "launcher/run/rank_output.h"

#include <unistd.h>

#include <catch2/catch.hpp>

#include "tests/support/test_util.h"

namespace gculaunch {
namespace {

struct Fixture {
  Fixture() : flow(io), writer({}, flow.SpaceCallback()) {
    console = *OutputTarget::FileForTest(dir.File("console"));
    log = *OutputTarget::FileForTest(dir.File("log"));
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

TEST_CASE("a progress bar on a console that is not a terminal: throttled, final state, raw log",
          "[rank_output]") {
  Fixture f;
  auto pipe = sys::MakePipe("test");
  REQUIRE(pipe.ok());
  bool closed = false;
  StreamRoute route{f.console, "[rank0]: ", f.log};
  route.progress_interval = std::chrono::hours(1);
  auto stream = RankStream::Start(f.io, std::move(pipe->read), route, f.writer, f.flow,
                                  [&] { closed = true; });
  std::string raw;
  for (int i = 0; i <= 20; ++i) {
    const std::string update = "\r" + std::to_string(i) + "/20" + (i == 20 ? "\n" : "");
    raw += update;
    WriteAll(pipe->write.get(), update);
    REQUIRE(f.io.run_one() == 1);  // one read per update, as with sleeps between them
  }
  WriteAll(pipe->write.get(), "after\n\r1/2\r2/2");
  raw += "after\n\r1/2\r2/2";
  pipe->write.Reset();  // end of stream: the bar's final state shows
  REQUIRE(testing::RunUntil(f.io, [&] { return closed; }));
  CHECK(stream->closed());
  CHECK(f.Console() == "[rank0]: 0/20\n[rank0]: 20/20\n[rank0]: after\n[rank0]: 2/2\n");
  CHECK(testing::ReadFile(f.dir.File("log")) == raw);
}

TEST_CASE("a held-back progress state shows when its interval has passed", "[rank_output]") {
  Fixture f;
  auto pipe = sys::MakePipe("test");
  REQUIRE(pipe.ok());
  StreamRoute route{f.console, "[rank0]: ", nullptr};
  route.progress_interval = std::chrono::milliseconds(50);
  auto stream = RankStream::Start(f.io, std::move(pipe->read), route, f.writer, f.flow, nullptr);
  WriteAll(pipe->write.get(), "\rstep 1");
  REQUIRE(f.io.run_one() == 1);  // shown
  WriteAll(pipe->write.get(), "\rstep 2");
  REQUIRE(f.io.run_one() == 1);  // held back
  REQUIRE(f.io.run_one() == 1);  // the timer: shown now (the bar has stalled)
  stream->Close();               // its final state is the one shown: not again
  CHECK(f.Console() == "[rank0]: step 1\n[rank0]: step 2\n");
}

TEST_CASE("duplicate filters: lines with a filter go to the shared file, whole, prefixed",
          "[rank_output]") {
  Fixture f;
  TargetPtr filtered = *OutputTarget::FileForTest(f.dir.File("filtered"));
  int closed = 0;
  std::vector<std::shared_ptr<RankStream>> streams;
  std::vector<sys::UniqueFd> writers;
  for (int rank : {1, 2}) {
    auto pipe = sys::MakePipe("test");
    REQUIRE(pipe.ok());
    // No idle flush during the test: the partial line must wait for its end.
    StreamRoute route{f.console, "[rank" + std::to_string(rank) + "]: ", nullptr, nullptr,
                      std::chrono::milliseconds(60000)};
    route.filtered = filtered;
    route.filters = {"loss", "a,b"};
    streams.push_back(RankStream::Start(f.io, std::move(pipe->read), std::move(route), f.writer,
                                        f.flow, [&] { ++closed; }));
    writers.push_back(std::move(pipe->write));
  }
  // Rank 1's matching line arrives in pieces, around rank 2's lines: each line stays whole.
  WriteAll(writers[0].get(), "step 1 lo");
  REQUIRE(f.io.poll() > 0);
  WriteAll(writers[1].get(), "x a,b y\nLOSS is not loss-case\nLOSS only\n");
  REQUIRE(f.io.poll() > 0);
  WriteAll(writers[0].get(), "ss=0.5\nno match\nbar 1\rbar loss\r\n");
  writers[0].Reset();
  writers[1].Reset();
  REQUIRE(testing::RunUntil(f.io, [&] { return closed == 2; }));
  CHECK(f.Console() ==
        "[rank2]: x a,b y\n[rank2]: LOSS is not loss-case\n[rank2]: LOSS only\n"
        "[rank1]: step 1 loss=0.5\n[rank1]: no match\n[rank1]: bar loss\n");
  // Case-sensitive substrings; a progress bar's final state is what is matched and kept.
  CHECK(testing::ReadFile(f.dir.File("filtered")) ==
        "[rank2]: x a,b y\n[rank2]: LOSS is not loss-case\n[rank1]: step 1 loss=0.5\n"
        "[rank1]: bar loss\n");
}

TEST_CASE("duplicate filters: a stream without filters writes nothing there", "[rank_output]") {
  Fixture f;
  auto pipe = sys::MakePipe("test");
  REQUIRE(pipe.ok());
  bool closed = false;
  StreamRoute route{nullptr, "[rank0]: ", f.log};
  route.filtered = *OutputTarget::FileForTest(f.dir.File("filtered"));
  RankStream::Start(f.io, std::move(pipe->read), std::move(route), f.writer, f.flow,
                    [&] { closed = true; });
  WriteAll(pipe->write.get(), "loss\n");
  pipe->write.Reset();
  REQUIRE(testing::RunUntil(f.io, [&] { return closed; }));
  CHECK(f.Console().empty());
  CHECK(testing::ReadFile(f.dir.File("filtered")).empty());
}

}  // namespace gculaunch
