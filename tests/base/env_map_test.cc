#include "base/env_map.h"

#include <catch2/catch.hpp>

namespace gculaunch {
namespace {

TEST_CASE("EnvMap parses environ strings and the first definition wins", "[env_map]") {
  EnvMap env = EnvMap::FromStrings({"A=1", "B=x=y", "NOEQ", "=bad", "A=2", "EMPTY="});
  CHECK(env.Get("A") == "1");
  CHECK(env.Get("B") == "x=y");
  CHECK(env.Get("EMPTY") == "");
  CHECK_FALSE(env.Has("NOEQ"));
  CHECK(env.size() == 3);
}

TEST_CASE("EnvMap round-trips through sorted KEY=VALUE strings", "[env_map]") {
  EnvMap env{{"Z", "1"}, {"A", "2"}};
  CHECK(env.ToStrings() == std::vector<std::string>{"A=2", "Z=1"});
  CHECK(EnvMap::FromStrings(env.ToStrings()) == env);
}

TEST_CASE("EnvMap::ChangedIn reports new and changed variables only", "[env_map]") {
  EnvMap before{{"KEEP", "1"}, {"CHANGE", "a"}, {"GONE", "x"}};
  EnvMap after{{"KEEP", "1"}, {"CHANGE", "b"}, {"NEW", "n"}};
  auto changed = before.ChangedIn(after);
  CHECK(changed == std::map<std::string, std::string>{{"CHANGE", "b"}, {"NEW", "n"}});
}

}  // namespace
}  // namespace gculaunch
