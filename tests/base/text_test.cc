#include "base/text.h"

#include <catch2/catch.hpp>

namespace gculaunch {
namespace {

TEST_CASE("text: environment variable names", "[text]") {
  CHECK(IsEnvName("PATH"));
  CHECK(IsEnvName("_x1"));
  CHECK(IsEnvName("ECCL_MAX_NCHANNELS"));
  CHECK_FALSE(IsEnvName(""));
  CHECK_FALSE(IsEnvName("1ABC"));
  CHECK_FALSE(IsEnvName("A-B"));
  CHECK_FALSE(IsEnvName("A B"));
  CHECK_FALSE(IsEnvName("A=B"));
}

TEST_CASE("text: edit distance", "[text]") {
  CHECK(EditDistance("", "") == 0);
  CHECK(EditDistance("abc", "") == 3);
  CHECK(EditDistance("", "abc") == 3);
  CHECK(EditDistance("nproc", "nproc") == 0);
  CHECK(EditDistance("--nprocs-per-node", "--nproc-per-node") == 1);
  CHECK(EditDistance("kitten", "sitting") == 3);
  CHECK(EditDistance("visble_env", "visible_env") == 1);
}

TEST_CASE("text: joins, numbers and seconds", "[text]") {
  CHECK(Join({"a", "b", "c"}, "; ") == "a; b; c");
  CHECK(Join({}, ",").empty());
  CHECK(JoinAnd({"a", "b", "c"}) == "a, b and c");
  CHECK(JoinInts({0, 3, 12}, ",") == "0,3,12");
  CHECK(JoinInts({7}, ", ") == "7");
  CHECK(JoinInts({}, ",").empty());
  CHECK(Seconds(std::chrono::duration<double>(2.25)) == "2.2 s");
  CHECK(Seconds(std::chrono::duration<double>(90)) == "90.0 s");
  CHECK(Seconds(std::chrono::duration<double>(0.25), -1) == "0.25 s");
  CHECK(Seconds(std::chrono::duration<double>(600), -1) == "600 s");
}

}  // namespace
}  // namespace gculaunch
