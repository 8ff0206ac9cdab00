#include "launcher/check/ld_cache.h"

#include <catch2/catch.hpp>
#include <cstring>

#include "tests/support/fake_ld_cache.h"

namespace gculaunch {
namespace {

using testing::CompatLdCache;
using testing::FakeLib;
using testing::kLdFlagsI386;
using testing::kLdFlagsX8664;
using testing::NewLdCache;
using testing::OldLdCache;

const std::vector<FakeLib> kLibs = {
    {kLdFlagsX8664, "libeccl.so.1", "/usr/lib/libeccl.so.1"},
    {kLdFlagsI386, "libz.so.1", "/usr/lib32/libz.so.1"},
    {kLdFlagsX8664, "libz.so.1", "/lib/x86_64-linux-gnu/libz.so.1"}};

void CheckEntries(const Result<std::vector<LdCacheEntry>>& entries) {
  REQUIRE(entries.ok());
  REQUIRE(entries->size() == 3);
  CHECK((*entries)[0].name == "libeccl.so.1");
  CHECK((*entries)[0].path == "/usr/lib/libeccl.so.1");
  CHECK((*entries)[1].path == "/usr/lib32/libz.so.1");
  CHECK((*entries)[2].path == "/lib/x86_64-linux-gnu/libz.so.1");
#if defined(__x86_64__)
  CHECK((*entries)[0].MatchesHost());
  CHECK_FALSE((*entries)[1].MatchesHost());
#endif
}

TEST_CASE("ld.so.cache: the new format", "[ld_cache]") {
  CheckEntries(ParseLdCache(NewLdCache(kLibs)));
}

TEST_CASE("ld.so.cache: the old format alone", "[ld_cache]") {
  CheckEntries(ParseLdCache(OldLdCache(kLibs)));
}

TEST_CASE("ld.so.cache: old + new (glibc 2.31 and older) uses the new part", "[ld_cache]") {
  CheckEntries(ParseLdCache(CompatLdCache(kLibs)));
}

TEST_CASE("ld.so.cache: corrupt files are errors, not crashes", "[ld_cache]") {
  CHECK(ParseLdCache("").error().what == "not an ld.so.cache file (unknown magic)");
  CHECK(ParseLdCache("hello world, this is not a cache").error().what ==
        "not an ld.so.cache file (unknown magic)");
  CHECK(ParseLdCache("glibc-ld.so.cache1.1").error().what == "truncated ld.so.cache header");

  std::string huge = NewLdCache(kLibs);
  const uint32_t many = 1000;
  std::memcpy(huge.data() + 20, &many, sizeof(many));
  CHECK(ParseLdCache(huge).error().what ==
        "ld.so.cache claims 1000 entries but is only " + std::to_string(huge.size()) + " bytes");

  std::string dangling = NewLdCache(kLibs);
  const uint32_t outside = 1u << 30;
  std::memcpy(dangling.data() + 48 + 8, &outside, sizeof(outside));  // entry 0's path
  CHECK(ParseLdCache(dangling).error().what == "ld.so.cache entry 0 points outside the file");

  // Every truncation of a valid cache parses or fails cleanly.
  const std::string whole = CompatLdCache(kLibs);
  for (size_t size = 0; size < whole.size(); ++size) {
    auto result = ParseLdCache(std::string_view(whole).substr(0, size));
    if (result.ok()) CHECK(result->size() <= 3);
  }
}

}  // namespace
}  // namespace gculaunch
