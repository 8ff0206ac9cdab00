// Tests of rendezvous/store_command.h: the flag table of `gculaunch store` and its one-line
// errors.  (The running command is tested end to end by tests/integration/test_store_cli.py.)
#include "rendezvous/store_command.h"

#include <catch2/catch.hpp>

namespace gculaunch::rendezvous {
namespace {

StoreCommandOptions Parse(const std::vector<std::string>& args) {
  auto parsed = ParseStoreArgs(args);
  if (!parsed.ok()) FAIL(parsed.error().Format());
  REQUIRE(std::holds_alternative<StoreCommandOptions>(*parsed));
  return std::get<StoreCommandOptions>(*parsed);
}

std::string ErrorOf(const std::vector<std::string>& args) {
  auto parsed = ParseStoreArgs(args);
  REQUIRE_FALSE(parsed.ok());
  return parsed.error().Format();
}

TEST_CASE("store command: defaults and every flag", "[store_command]") {
  const auto defaults = Parse({});
  CHECK(defaults.host == "127.0.0.1");
  CHECK(defaults.port == 29500);
  CHECK(defaults.limits.max_value_size == kDefaultMaxValueSize);
  CHECK(defaults.log_level == "info");

  const auto all = Parse({"--host", "", "--port", "0", "--max-connections", "10", "--max-key-size",
                          "4K", "--max-value-size", "2M", "--max-keys-per-request", "7",
                          "--max-request-size", "1G", "--log-level", "debug"});
  CHECK(all.host.empty());
  CHECK(all.port == 0);
  CHECK(all.max_connections == 10);
  CHECK(all.limits.max_key_size == 4096);
  CHECK(all.limits.max_value_size == 2u << 20);
  CHECK(all.limits.max_keys_per_request == 7);
  CHECK(all.limits.max_request_size == 1u << 30);
  CHECK(all.log_level == "debug");
  CHECK(Parse({"--port=65535", "--max-value-size=123"}).limits.max_value_size == 123);
  CHECK(Parse({"--max-value-size", "8MiB"}).limits.max_value_size == 8u << 20);
  CHECK(defaults.limits.max_queued == kDefaultMaxQueued);
  CHECK(defaults.limits.max_buffered == kDefaultMaxBuffered);
  const auto bounds = Parse({"--max-queued", "3M", "--max-buffered", "1G"});
  CHECK(bounds.limits.max_queued == 3u << 20);
  CHECK(bounds.limits.max_buffered == 1u << 30);
}

TEST_CASE("store command: --upstream makes it a store proxy", "[store_command]") {
  CHECK(Parse({}).upstream_host.empty());
  const auto v4 = Parse({"--upstream", "10.0.0.1:29500"});
  CHECK(v4.upstream_host == "10.0.0.1");
  CHECK(v4.upstream_port == 29500);
  const auto v6 = Parse({"--upstream=[::1]:1"});
  CHECK(v6.upstream_host == "::1");
  CHECK(v6.upstream_port == 1);
  CHECK(Parse({"--upstream", "node0.example:65535"}).upstream_host == "node0.example");
}

TEST_CASE("store command: --help is text for stdout", "[store_command]") {
  auto parsed = ParseStoreArgs({"--help"});
  REQUIRE(parsed.ok());
  REQUIRE(std::holds_alternative<StoreHelp>(*parsed));
  const auto& text = std::get<StoreHelp>(*parsed).text;
  CHECK_THAT(text, Catch::Contains("--port"));
  CHECK_THAT(text, Catch::Contains("listening on HOST:PORT"));
}

TEST_CASE("store command: bad flags give one line naming the flag and the fix", "[store_command]") {
  struct Row {
    std::vector<std::string> args;
    const char* names;
  };
  const std::vector<Row> rows = {
      {{"--port", "70000"}, "--port"},
      {{"--port", "abc"}, "--port"},
      {{"--port"}, "--port"},
      {{"--bogus"}, "--bogus"},
      {{"stray"}, "stray"},
      {{"--max-connections", "0"}, "--max-connections"},
      {{"--max-value-size", "12x"}, "--max-value-size '12x': not a size"},
      {{"--max-key-size", "0"}, "--max-key-size '0': must be at least 1 byte"},
      {{"--max-request-size", "99999999999999999999"}, "--max-request-size"},
      {{"--log-level", "loud"}, "--log-level"},
      {{"--upstream", "10.0.0.1"}, "--upstream '10.0.0.1': not HOST:PORT"},
      {{"--upstream", "10.0.0.1:0"}, "--upstream '10.0.0.1:0'"},
      {{"--upstream", "10.0.0.1:65536"}, "--upstream"},
      {{"--upstream", ":29500"}, "--upstream"},
      {{"--upstream", "::1:29500"}, "--upstream"},
      {{"--upstream", "[::1]29500"}, "--upstream"},
      {{"--upstream", "host:12x"}, "--upstream"},
  };
  for (const auto& row : rows) {
    const std::string message = ErrorOf(row.args);
    INFO(message);
    CHECK(message.starts_with("gculaunch: "));
    CHECK_THAT(message, Catch::Contains(row.names));
    CHECK_THAT(message, Catch::Contains("(fix: "));
    CHECK(message.find('\n') == std::string::npos);
  }
}

}  // namespace
}  // namespace gculaunch::rendezvous
