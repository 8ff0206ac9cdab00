// Tests of the store's memory bounds (issue 26, docs/tcpstore-protocol.md section 6.1):
// replies share stored values and the ledger counts each once; APPEND keeps the value limit;
// a connection whose unsent bytes pass max_queued is closed, deliveries included; all
// connections together stay under max_buffered, partial frames included, by closing the one
// holding the most; warnings about bad connections are rate-limited with a summary; and a
// MULTI_GET of 10 000 ranks' keys passes under the defaults.
#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "rendezvous/codec.h"
#include "rendezvous/server.h"
#include "rendezvous/store.h"
#include "tests/rendezvous/decode_util.h"
#include "tests/rendezvous/server_test_util.h"

namespace gculaunch::rendezvous {
namespace {

using testing::kHandshake;
using testing::RawClient;
using testing::Req;
using testing::ServerFixture;
using testing::V1;
using testing::V2;

TEST_CASE("reply: large values are shared, small ones copied, each pinned value counted once",
          "[bounds]") {
  ValueLedger ledger;
  const auto big = std::make_shared<const std::string>(1000, 'b');
  const auto small = std::make_shared<const std::string>("s");
  {
    Reply reply(&ledger);
    AppendBlob(reply, big);
    AppendBlob(reply, big);
    AppendBlob(reply, small);
    CHECK(reply.size() == 3 * 8 + 2000 + 1);
    CHECK(reply.own_bytes() == 3 * 8 + 1);
    CHECK(ledger.bytes() == 1000);
    CHECK(reply.piece(1).value == big);
    const std::string flat = reply.Flatten();
    CHECK(flat.substr(8, 1000) == *big);
    reply.Consume(8 + 1000 + 3);  // the first value sent, and part of the second length
    CHECK(ledger.bytes() == 1000);
    CHECK(reply.Flatten() == flat.substr(1011));
    Reply moved(std::move(reply));
    CHECK(reply.empty());
    CHECK(moved.size() == flat.size() - 1011);
    moved.Consume(5 + 1000);
    CHECK(ledger.bytes() == 0);
    AppendBlob(moved, big);
    CHECK(ledger.bytes() == 1000);
  }
  CHECK(ledger.bytes() == 0);  // destruction unpins
}

TEST_CASE("decoder: a partial frame counts as buffered, a handled request is trimmed", "[bounds]") {
  Decoder decoder;
  const std::string wire = V1(Req(Op::kSet, {"/k"}, {std::string(100000, 'v')}));
  auto step = decoder.Decode(std::string_view(wire).substr(0, 50000));
  CHECK(step.status == Decoder::Status::kNeedMore);
  CHECK(decoder.buffered() >= 50000 - 32);
  step = decoder.Decode(std::string_view(wire).substr(50000));
  REQUIRE(step.status == Decoder::Status::kRequest);
  CHECK(decoder.buffered() == 0);
  decoder.TrimRequest();
  CHECK(decoder.request().values[0].capacity() < 100000);
  CHECK(decoder.request().keys[0] == "/k");  // small strings keep their buffers
}

// Drives a Store with replies kept as Reply objects.
struct StoreDriver {
  explicit StoreDriver(std::size_t max_value = kDefaultMaxValueSize) : store(0, max_value) {
    store.Open(1);
    store.Open(2);
  }
  Reply Do(ConnId id, Request request) {
    Reply reply;
    effects.Clear();
    store.Handle(id, request, reply, effects);
    return reply;
  }
  Store store;
  Effects effects;
};

TEST_CASE("store: GET and MULTI_GET share the stored value, whatever the number of names",
          "[bounds]") {
  StoreDriver d;
  d.Do(1, Req(Op::kSet, {"/k"}, {std::string(4096, 'v')}));
  const std::string* stored = d.store.Find(Scope::kAttempt, "/k");
  REQUIRE(stored != nullptr);
  Reply one = d.Do(2, Req(Op::kGet, {"/k"}));
  REQUIRE(one.pieces() == 2);
  CHECK(one.piece(1).value.get() == stored);
  Reply many = d.Do(2, Req(Op::kMultiGet, std::vector<std::string>(2000, "/k")));
  CHECK(many.size() == 2000 * (8 + 4096));
  CHECK(many.own_bytes() == 2000 * 8);
}

TEST_CASE("store: a watch event shares the old and the new value", "[bounds]") {
  StoreDriver d;
  d.Do(2, Req(Op::kWatchKey, {"/w"}));
  d.Do(1, Req(Op::kSet, {"/w"}, {std::string(1000, 'a')}));
  d.Do(1, Req(Op::kSet, {"/w"}, {std::string(1000, 'b')}));
  REQUIRE(d.effects.deliveries.size() == 1);
  const Reply& event = d.effects.deliveries[0].bytes;
  CHECK(event.size() == 1 + 8 + 2 + 8 + 1000 + 8 + 1000);
  CHECK(event.own_bytes() == 1 + 8 + 2 + 8 + 8);
  CHECK(d.store.Find(Scope::kAttempt, "/w")->front() == 'b');
}

TEST_CASE("store: APPEND never grows a value past the value limit", "[bounds]") {
  StoreDriver d(1000);
  d.Do(1, Req(Op::kAppend, {"/a"}, {std::string(600, 'a')}));
  CHECK_FALSE(d.effects.close());
  Reply shared = d.Do(2, Req(Op::kGet, {"/a"}));  // a queued reply shares the value
  d.Do(1, Req(Op::kAppend, {"/a"}, {std::string(400, 'b')}));
  CHECK_FALSE(d.effects.close());
  CHECK(d.store.Find(Scope::kAttempt, "/a")->size() == 1000);
  CHECK(shared.size() == 8 + 600);  // the queued reply still holds the old value
  d.Do(1, Req(Op::kAppend, {"/a"}, {std::string(1, 'c')}));
  CHECK(d.effects.close());
  CHECK(d.effects.close_reason.find("past the limit of 1000 bytes") != std::string::npos);
  CHECK(d.store.Find(Scope::kAttempt, "/a")->size() == 1000);
}

TEST_CASE("server: a watcher that does not read is closed once its events pass max_queued",
          "[bounds][server]") {
  ServerOptions options;
  options.limits.max_queued = 4u << 20;
  ServerFixture f(options);
  RawClient watcher(f.port());
  const int small_buffer = 4096;
  ::setsockopt(watcher.fd(), SOL_SOCKET, SO_RCVBUF, &small_buffer, sizeof small_buffer);
  watcher.Send(V1(Req(Op::kWatchKey, {"/w"})));
  CHECK(watcher.Read(1) == std::string(1, '\3'));
  RawClient setter(f.port());
  for (int i = 0; i < 16; ++i) setter.Send(V1(Req(Op::kSet, {"/w"}, {std::string(1u << 20, 'x')})));
  setter.Send(V1(Req(Op::kGetNumKeys)));
  CHECK(setter.Read(8).size() == 8);  // the writer was never stalled
  CHECK(f.log().WaitFor({"closing connection", watcher.LocalName(), "bytes wait to be sent"}));
  RawClient late(f.port());
  late.Send(V1(Req(Op::kGet, {"/w"})));
  CHECK(late.Read(8 + (1u << 20)).size() == 8 + (1u << 20));
}

TEST_CASE("server: partial frames together stay under max_buffered", "[bounds][server]") {
  ServerOptions options;
  options.limits.max_buffered = 10u << 20;  // two finished partial frames fit, not three
  ServerFixture f(options);
  std::vector<std::unique_ptr<RawClient>> senders;
  std::string partial = V1(Req(Op::kSet, {"/p"}, {std::string(3u << 20, 'p')}));
  partial.pop_back();  // all but the last byte
  for (int i = 0; i < 4; ++i) {
    senders.push_back(std::make_unique<RawClient>(f.port()));
    senders.back()->Send(partial);
  }
  CHECK(f.log().WaitFor({"closing connection", "--max-buffered", "holds the most"}));
  RawClient legit(f.port());
  legit.Send(V1(Req(Op::kGetNumKeys)));
  CHECK(legit.Read(8).size() == 8);
  int shed = 0;
  for (const auto& line : f.log().Lines()) {
    if (line.find("--max-buffered") != std::string::npos) ++shed;
  }
  CHECK(shed >= 1);
  CHECK(shed < 4);  // the connection holding the most goes first, not all of them
}

TEST_CASE("server: warnings about bad connections are rate-limited and summarized",
          "[bounds][server]") {
  ServerOptions options;
  options.warn_burst = 3;
  options.warn_interval = std::chrono::milliseconds(200);
  ServerFixture f(options);
  for (int i = 0; i < 50; ++i) {
    RawClient garbage(f.port());
    garbage.Send(std::string(1, '\xff'));
    CHECK(garbage.ReadsEof());
  }
  CHECK(f.log().WaitFor({"more warnings about connections", "were not logged one by one"}));
  int lines = 0;
  for (auto& line : f.log().Lines()) {
    if (line.find("closing connection") == 0) ++lines;
  }
  CHECK(lines <= 3 * 2);  // one window, perhaps two
}

TEST_CASE("server: a MULTI_GET of 10000 ranks' keys passes under the default limits",
          "[bounds][server]") {
  ServerFixture f;
  RawClient c(f.port());
  std::vector<std::string> keys;
  std::vector<std::string> values;
  for (int i = 0; i < 10000; ++i) {
    keys.push_back("/rank_" + std::to_string(i));
    values.push_back("tcp://10.0.0.1:" + std::to_string(20000 + i) + std::string(100, 'x'));
  }
  c.Send(kHandshake + V2(Req(Op::kMultiSet, keys, values)) + V2(Req(Op::kMultiGet, keys)));
  for (int i = 0; i < 10000; ++i) {
    const std::string len = c.Read(8);
    const auto n = LoadU64(reinterpret_cast<const std::uint8_t*>(len.data()));
    REQUIRE(c.Read(n) == values[static_cast<std::size_t>(i)]);
  }
  CHECK_FALSE(f.log().Contains({"closing connection"}));
}

}  // namespace
}  // namespace gculaunch::rendezvous
