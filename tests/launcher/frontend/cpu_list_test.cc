#include "launcher/frontend/cpu_list.h"

#include <catch2/catch.hpp>

namespace gculaunch {
namespace {

using Cpus = std::vector<int>;

TEST_CASE("cpu list: kernel text parses", "[cpu_list]") {
  CHECK(ParseCpuList("0-3,8,10-11\n") == Cpus{0, 1, 2, 3, 8, 10, 11});
  CHECK(ParseCpuList("5") == Cpus{5});
  CHECK(ParseCpuList("") == Cpus{});
  CHECK(ParseCpuList("\n") == Cpus{});
  CHECK(ParseCpuList(" 3,1,2-2 ") == Cpus{1, 2, 3});
  CHECK(ParseCpuList("0-1,1-2") == Cpus{0, 1, 2});
}

TEST_CASE("cpu list: malformed text is rejected", "[cpu_list]") {
  for (const char* bad : {"3-1", "a", "1,,2", "1-", "-1", "0-2x", ",", "1 2", "0-99999999"}) {
    INFO(bad);
    CHECK_FALSE(ParseCpuList(bad).has_value());
  }
}

TEST_CASE("cpu list: formatting is the kernel's shortest form", "[cpu_list]") {
  CHECK(FormatCpuList({0, 1, 2, 3, 8}) == "0-3,8");
  CHECK(FormatCpuList({8, 3, 2, 1, 0, 3}) == "0-3,8");
  CHECK(FormatCpuList({}) == "");
  CHECK(FormatCpuList({7}) == "7");
  CHECK(FormatCpuList({1, 3, 5}) == "1,3,5");
  CHECK(FormatCpuList({4, 5}) == "4-5");
  CHECK(*ParseCpuList(FormatCpuList({0, 2, 3, 4, 9, 10})) == Cpus{0, 2, 3, 4, 9, 10});
}

}  // namespace
}  // namespace gculaunch
