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

}  // namespace gculaunch::sys
