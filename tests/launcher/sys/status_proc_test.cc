#include "launcher/sys/status_proc.h"

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

}  // namespace gculaunch::sys
