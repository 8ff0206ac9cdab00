#include "launcher/sys/status_proc.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace gculaunch::sys {

TEST_CASE("a stat line with a strange command name parses", "[status_proc]") {
  const std::string stat =
      "4242 (py (thon) 3) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 12345 "
      "100000000 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
  ProcSample s;
  std::uint64_t start = 0;
  REQUIRE(ParseProcStat(stat, 100, 4096, &s, &start));
  CHECK(s.state == 'S');
  CHECK(s.cpu_s == Approx(3.0));
  CHECK(start == 12345);
  CHECK(s.rss_bytes == 2048ULL * 4096);
  CHECK_FALSE(ParseProcStat("4242 (x) S 1 2", 100, 4096, &s, &start));
  CHECK_FALSE(ParseProcStat("garbage", 100, 4096, &s, &start));
}

TEST_CASE("this process samples alive, a pid that does not exist does not", "[status_proc]") {
  const ProcSample self = SampleProcess(::getpid());
  CHECK(self.alive);
  CHECK(self.rss_bytes > 0);
  CHECK(self.uptime_s >= 0);
  CHECK_FALSE(SampleProcess(-1).alive);
  CHECK_FALSE(SampleProcess(0).alive);
}

TEST_CASE("status proc: PSS from smaps_rollup, in bytes", "[status_proc]") {
  const std::string rollup =
      "55d0c7a4b000-7ffd8a1f2000 ---p 00000000 00:00 0                          [rollup]\n"
      "Rss:              409600 kB\n"
      "Pss:              123456 kB\n"
      "Pss_Anon:          60000 kB\n";
  CHECK(ParsePssBytes(rollup) == 123456ULL * 1024);
  CHECK_FALSE(ParsePssBytes("Rss: 10 kB\n").has_value());
  CHECK_FALSE(ParsePssBytes("Pss: kB\n").has_value());
  // This process: a live one has a PSS (kernels without smaps_rollup say nothing).
  if (auto self = ReadPssBytes(::getpid())) CHECK(*self > 0);
  CHECK_FALSE(ReadPssBytes(-1).has_value());
}

TEST_CASE("status proc: the state and the tracer of a status text", "[status_proc]") {
  const std::string status =
      "Name:\tpython3\nUmask:\t0022\nState:\tT (stopped)\nTgid:\t4242\nPid:\t4242\n"
      "PPid:\t1\nTracerPid:\t0\nUid:\t0\t0\t0\t0\n";
  auto parsed = ParseTaskStatus(status);
  REQUIRE(parsed.ok());
  CHECK(parsed->state == 'T');
  CHECK(parsed->tracer == 0);
  auto traced = ParseTaskStatus("State:\tt (tracing stop)\nTracerPid:\t77\n");
  REQUIRE(traced.ok());
  CHECK(traced->state == 't');
  CHECK(traced->tracer == 77);
  CHECK(StatusField(status, "PPid") == "1");
  CHECK(StatusField(status, "Nope").empty());
  // "State" must start a line: "XState:" is another field.
  CHECK_FALSE(ParseTaskStatus("XState:\tR\nTracerPid:\t0\n").ok());
  CHECK(ParseTaskStatus("State:\tR\n").error().what ==
        "no TracerPid number in the process's status");
  CHECK_FALSE(ParseTaskStatus("State:\tR\nTracerPid:\tx1\n").ok());
  CHECK(ParseTaskStatus("").error().what == "no State line in the process's status");
}

TEST_CASE("status proc: a stopped child reads as state T, a missing one as an error",
          "[status_proc]") {
  auto self = ReadTaskStatus(::getpid());
  REQUIRE(self.ok());
  CHECK(self->state == 'R');
  const pid_t child = ::fork();
  if (child == 0) {
    for (;;) ::pause();
  }
  REQUIRE(child > 0);
  REQUIRE(::kill(child, SIGSTOP) == 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, WUNTRACED) == child);  // it is stopped now
  REQUIRE(WIFSTOPPED(status));
  auto stopped = ReadTaskStatus(child);
  REQUIRE(stopped.ok());
  CHECK(stopped->state == 'T');
  CHECK(stopped->tracer == 0);
  REQUIRE(::kill(child, SIGKILL) == 0);
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK_FALSE(ReadTaskStatus(child).ok());
  CHECK_FALSE(ReadTaskStatus(-1).ok());
}

}  // namespace gculaunch::sys
