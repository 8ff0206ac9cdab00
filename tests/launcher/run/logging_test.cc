#include "launcher/run/logging.h"

#include <catch2/catch.hpp>

#include "tests/support/test_util.h"

namespace gculaunch {

TEST_CASE("log lines name gculaunch and the level", "[logging]") {
  CHECK(FormatLogLine(spdlog::level::info, "hello") == "gculaunch: hello\n");
  CHECK(FormatLogLine(spdlog::level::warn, "careful") == "gculaunch: warning: careful\n");
  CHECK(FormatLogLine(spdlog::level::err, "broken") == "gculaunch: error: broken\n");
  CHECK(FormatLogLine(spdlog::level::debug, "detail") == "gculaunch: debug: detail\n");
}

TEST_CASE("the logger goes through the writer while attached", "[logging]") {
  testing::TempDir dir;
  auto target = OutputTarget::FileForTest(dir.File("err"));
  REQUIRE(target.ok());
  auto sink = std::make_shared<LogSink>();
  auto log = MakeLogger(sink, "info");
  OutputWriter writer({}, nullptr);
  sink->Attach(&writer, *target);
  log->info("one {}", 1);
  log->debug("not shown at info level");
  log->warn("two");
  sink->Detach();
  REQUIRE(writer.Finish(std::chrono::seconds(10)));
  CHECK(testing::ReadFile(dir.File("err")) == "gculaunch: one 1\ngculaunch: warning: two\n");
  CHECK(MakeLogger(sink, "debug")->level() == spdlog::level::debug);
  CHECK(MakeLogger(sink, "error")->level() == spdlog::level::err);
  CHECK(MakeLogger(sink, "bogus")->level() == spdlog::level::info);
}

}  // namespace gculaunch
