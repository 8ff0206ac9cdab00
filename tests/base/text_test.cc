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

}  // namespace
}  // namespace gculaunch
