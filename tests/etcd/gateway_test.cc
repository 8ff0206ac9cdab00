// Tests of etcd/gateway.h: base64 and prefix ends, the request bodies, and the
// replies of etcd 3.4's gateway as it really sends them (numbers as strings, defaults left
// out, errors as objects), including the two traps of the issue: a failed transaction
// without `succeeded` and a keepalive on an expired lease without `TTL`.
#include "etcd/gateway.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace gculaunch::etcd {
namespace {

using nlohmann::json;

TEST_CASE("base64 round-trips every byte value and every length") {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (std::size_t n = 0; n <= all.size(); n += 37) {
    auto decoded = Base64Decode(Base64Encode(all.substr(0, n)));
    REQUIRE(decoded.ok());
    CHECK(*decoded == all.substr(0, n));
  }
  CHECK(Base64Encode("foo") == "Zm9v");
  CHECK(Base64Encode("fo") == "Zm8=");
  CHECK(Base64Encode("f") == "Zg==");
  CHECK(*Base64Decode("Zm8") == "fo");  // padding optional
  auto bad = Base64Decode("Zm9v!");
  REQUIRE(!bad.ok());
  CHECK(bad.error().what == "not base64: byte 4 is '!'");
}

TEST_CASE("a prefix's range end is its last byte plus one") {
  CHECK(PrefixEnd("/gculaunch/job/") == "/gculaunch/job0");
  CHECK(PrefixEnd("a\xff") == "b");
  CHECK(PrefixEnd(std::string("\xff\xff")) == std::string(1, '\0'));
  CHECK(PrefixEnd("") == std::string(1, '\0'));
}

TEST_CASE("request bodies use base64 and 64-bit numbers as strings") {
  CHECK(json::parse(PutBody("k", "v", 7)) ==
        json{{"key", "aw=="}, {"value", "dg=="}, {"lease", "7"}});
  CHECK(json::parse(PutBody("k", "", 0)) == json{{"key", "aw=="}, {"value", ""}});
  CHECK(json::parse(RangeBody("a", "b", 0)) == json{{"key", "YQ=="}, {"range_end", "Yg=="}});
  CHECK(json::parse(LeaseIdBody(9007199254740993)) == json{{"ID", "9007199254740993"}});
  TxnRequest txn{{Compare::Missing("k")}, {RequestOp::Put("k", "v", 5)}, {RequestOp::Get("k")}};
  json body = json::parse(TxnBody(txn));
  CHECK(body["compare"][0] ==
        json{{"key", "aw=="}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", "0"}});
  CHECK(body["success"][0]["request_put"]["lease"] == "5");
  CHECK(body["failure"][0]["request_range"]["key"] == "aw==");
  CHECK(json::parse(WatchCreateBody("k", "", 12, false)) ==
        json{{"create_request", {{"key", "aw=="}, {"start_revision", "12"}}}});
}

TEST_CASE("a range reply: strings as numbers, absent fields as defaults") {
  auto range = ParseRange(
      R"({"header":{"revision":"9223372036854775807"},"kvs":[{"key":"Zm9v","create_revision":"2",)"
      R"("mod_revision":"3","version":"2","value":"YmFy","lease":"4611686018427387904"}],"count":"1"})");
  REQUIRE(range.ok());
  CHECK(range->revision == 9223372036854775807);
  REQUIRE(range->kvs.size() == 1);
  CHECK(range->kvs[0].key == "foo");
  CHECK(range->kvs[0].value == "bar");
  CHECK(range->kvs[0].lease == 4611686018427387904);
  auto empty = ParseRange(R"({"header":{"revision":"2"}})");
  REQUIRE(empty.ok());
  CHECK(empty->kvs.empty());
  CHECK(empty->count == 0);
  auto bad = ParseRange(R"({"header":{"revision":"x2"}})");
  REQUIRE(!bad.ok());
  CHECK(bad.error().what ==
        "etcd's range reply is malformed: field 'revision' is not a 64-bit integer: \"x2\"");
}

TEST_CASE("a failed transaction has no 'succeeded' and still parses as failed") {
  auto failed = ParseTxn(
      R"({"header":{"revision":"3"},"responses":[{"response_range":{"header":{"revision":"3"},)"
      R"("kvs":[{"key":"Zm9v","create_revision":"2","mod_revision":"2","version":"1","value":"YQ=="}],"count":"1"}}]})");
  REQUIRE(failed.ok());
  CHECK_FALSE(failed->succeeded);
  REQUIRE(failed->responses.size() == 1);
  CHECK(failed->responses[0].range.kvs[0].value == "a");
  auto ok = ParseTxn(
      R"({"header":{"revision":"4"},"succeeded":true,"responses":[{"response_put":{"header":{"revision":"4"}}}]})");
  REQUIRE(ok.ok());
  CHECK(ok->succeeded);
  CHECK(ok->responses[0].kind == RequestOp::Kind::kPut);
}

TEST_CASE("a keepalive without TTL means the lease expired") {
  auto expired = ParseKeepAlive(R"({"result":{"header":{"revision":"3"},"ID":"12345"}})");
  REQUIRE(expired.ok());
  CHECK(expired->expired);
  auto alive = ParseKeepAlive(R"({"result":{"header":{"revision":"3"},"ID":"12345","TTL":"5"}})");
  REQUIRE(alive.ok());
  CHECK_FALSE(alive->expired);
  CHECK(alive->ttl == 5);
}

TEST_CASE("gateway errors: unary and streamed forms") {
  auto unary = ParseGatewayError(
      R"({"error":"etcdserver: invalid auth token","message":"etcdserver: invalid auth token","code":16})");
  REQUIRE(unary.has_value());
  CHECK(unary->code == kCodeUnauthenticated);
  CHECK(unary->message == "etcdserver: invalid auth token");
  auto streamed =
      ParseGatewayError(R"({"error":{"grpc_code":14,"http_code":503,"message":"no leader"}})");
  REQUIRE(streamed.has_value());
  CHECK(streamed->code == kCodeUnavailable);
  CHECK_FALSE(ParseGatewayError(R"({"header":{}})").has_value());
  CHECK_FALSE(ParseGatewayError("not json").has_value());
}

TEST_CASE("watch lines: created, events with deletes, compaction") {
  auto created = ParseWatchLine(R"({"result":{"header":{"revision":"4"},"created":true}})");
  REQUIRE(created.ok());
  CHECK(created->created);
  CHECK(created->revision == 4);
  auto events = ParseWatchLine(
      R"({"result":{"header":{"revision":"6"},"events":[{"kv":{"key":"YQ==","create_revision":"5","mod_revision":"5","version":"1","value":"MQ=="}},)"
      R"({"type":"DELETE","kv":{"key":"YQ==","mod_revision":"6"}}]}})");
  REQUIRE(events.ok());
  REQUIRE(events->events.size() == 2);
  CHECK(events->events[0].type == Event::Type::kPut);
  CHECK(events->events[1].type == Event::Type::kDelete);
  CHECK(events->events[1].kv.mod_revision == 6);
  auto compacted =
      ParseWatchLine(R"({"result":{"header":{},"canceled":true,"compact_revision":"3"}})");
  REQUIRE(compacted.ok());
  CHECK(compacted->canceled);
  CHECK(compacted->compact_revision == 3);
  auto error = ParseWatchLine(R"({"error":{"grpc_code":14,"message":"no leader"}})");
  REQUIRE(!error.ok());
  CHECK(error.error().what == "etcd ended the watch: no leader (code 14)");
}

}  // namespace
}  // namespace gculaunch::etcd
