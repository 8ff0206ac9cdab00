// Tests of rendezvous/store.h: the semantics of docs/tcpstore-protocol.md sections 5 and 6,
// the stale-WAIT trap, CANCEL_WAIT corner cases, WATCH_KEY events, queues, and namespaces /
// attempts.
#include "rendezvous/store.h"

#include <catch2/catch.hpp>
#include <map>

#include "tests/rendezvous/decode_util.h"

namespace gculaunch::rendezvous {
namespace {

using testing::FromHex;
using testing::Req;
using testing::ToHex;

std::string I64(std::int64_t v) {
  std::string s;
  AppendI64(s, v);
  return s;
}
std::string Blob(std::string_view v) {
  std::string s;
  AppendBlob(s, v);
  return s;
}
const std::string kStop(1, '\0');
const std::string kCanceled(1, '\1');
const std::string kReady(1, '\0');
const std::string kNotReady(1, '\1');

// Drives a Store like the server does: replies and deliveries land in per-connection inboxes.
class Harness {
 public:
  ConnId Open(Scope scope = Scope::kAttempt) {
    const ConnId id = next_++;
    store.Open(id, scope);
    return id;
  }

  /// Sends a request from `id`; returns its own reply bytes.  Deliveries go to the inboxes of
  /// their targets; a close is recorded and carried out.
  std::string Do(ConnId id, Request request) {
    Reply reply;
    effects_.Clear();
    store.Handle(id, request, reply, effects_);
    for (auto& d : effects_.deliveries) {
      inbox_[d.conn] += d.bytes.Flatten();
      order_.push_back(d.conn);
    }
    if (effects_.close()) {
      closed[id] = effects_.close_reason;
      store.Close(id);
    }
    return reply.Flatten();
  }

  /// Bytes delivered to `id` by other connections' requests since the last Take.
  std::string Take(ConnId id) { return std::exchange(inbox_[id], std::string()); }
  /// Connections that received deliveries, in delivery order, since the last call.
  std::vector<ConnId> TakeOrder() { return std::exchange(order_, {}); }

  Store store;
  std::map<ConnId, std::string> closed;

 private:
  ConnId next_ = 1;
  Effects effects_;
  std::map<ConnId, std::string> inbox_;
  std::vector<ConnId> order_;
};

Request Set(std::string k, std::string v) { return Req(Op::kSet, {std::move(k)}, {std::move(v)}); }
Request Get(std::string k) { return Req(Op::kGet, {std::move(k)}); }
Request Add(std::string k, std::int64_t d) { return Req(Op::kAdd, {std::move(k)}, {}, d); }
Request Wait(std::vector<std::string> keys) { return Req(Op::kWait, std::move(keys)); }
Request Check(std::vector<std::string> keys) { return Req(Op::kCheck, std::move(keys)); }
Request CompareSet(std::string k, std::string e, std::string d) {
  return Req(Op::kCompareSet, {std::move(k)}, {std::move(e), std::move(d)});
}
Request Del(std::string k) { return Req(Op::kDeleteKey, {std::move(k)}); }
Request NumKeys() { return Req(Op::kGetNumKeys); }
Request Cancel() { return Req(Op::kCancelWait); }

TEST_CASE("SET, GET and empty values", "[store]") {
  Harness h;
  const ConnId a = h.Open();
  CHECK(h.Do(a, Set("/key1", "value1")).empty());  // SET has no reply
  CHECK(h.Do(a, Get("/key1")) == Blob("value1"));
  CHECK(h.Do(a, Set("/key1", "other")).empty());
  CHECK(h.Do(a, Get("/key1")) == Blob("other"));
  CHECK(h.Do(a, Set("/empty", "")).empty());
  CHECK(h.Do(a, Get("/empty")) == Blob(""));
  CHECK(h.Do(a, Set("/bin", std::string("\0\1\2", 3))).empty());
  CHECK(h.Do(a, Get("/bin")) == Blob(std::string("\0\1\2", 3)));
}

TEST_CASE("GET of a missing key replies an empty blob and keeps the connection", "[store]") {
  Harness h;
  const ConnId a = h.Open();
  CHECK(h.Do(a, Get("/no_such_key")) == Blob(""));
  CHECK(h.closed.empty());
  CHECK(h.Do(a, NumKeys()) == I64(0));  // GET created nothing
}

TEST_CASE("ADD follows strtoll rules and stores shortest decimal text", "[store]") {
  Harness h;
  const ConnId a = h.Open();
  struct Row {
    const char* initial;  // nullptr: key missing
    std::int64_t delta;
    std::int64_t reply;
    const char* stored;
  };
  const std::vector<Row> rows = {
      {nullptr, 5, 5, "5"},
      {"5", 3, 8, "8"},
      {"8", -10, -2, "-2"},
      {"-2", 0, -2, "-2"},
      {"12abc", 1, 13, "13"},
      {"  \t-7", 1, -6, "-6"},
      {"+4", 0, 4, "4"},
      {"007", 1, 8, "8"},
      {"1e3", 0, 1, "1"},
      {"9223372036854775807", 1, INT64_MIN, "-9223372036854775808"},
      {"-9223372036854775808", 0, INT64_MIN, "-9223372036854775808"},
  };
  for (const Row& row : rows) {
    INFO("initial " << (row.initial ? row.initial : "(missing)") << " delta " << row.delta);
    h.Do(a, Del("/c"));
    if (row.initial) h.Do(a, Set("/c", row.initial));
    CHECK(h.Do(a, Add("/c", row.delta)) == I64(row.reply));
    CHECK(h.Do(a, Get("/c")) == Blob(row.stored));
  }
  CHECK(h.closed.empty());
}

TEST_CASE("ADD on a value that is not a number closes that connection only", "[store]") {
  for (const char* bad : {"abc", "", " ", "-", "x1", "99999999999999999999"}) {
    INFO("value '" << bad << "'");
    Harness h;
    const ConnId a = h.Open();
    const ConnId b = h.Open();
    h.Do(b, Set("/key_not_a_number", bad));
    CHECK(h.Do(a, Add("/key_not_a_number", 1)).empty());
    REQUIRE(h.closed.count(a) == 1);
    CHECK_THAT(h.closed[a], Catch::Contains("is not a number"));
    CHECK_THAT(h.closed[a], Catch::Contains("/key_not_a_number"));
    CHECK_FALSE(h.store.IsOpenForTest(a));
    CHECK(h.Do(b, Get("/key_not_a_number")) == Blob(bad));  // key unchanged
    CHECK(h.closed.count(b) == 0);
  }
}

TEST_CASE("COMPARE_SET: the four cases", "[store]") {
  Harness h;
  const ConnId a = h.Open();
  h.Do(a, Set("/key1", "value1"));
  // present and equal: store desired, reply desired
  CHECK(h.Do(a, CompareSet("/key1", "value1", "value2")) == Blob("value2"));
  CHECK(h.Do(a, Get("/key1")) == Blob("value2"));
  // present and different: store nothing, reply current
  CHECK(h.Do(a, CompareSet("/key1", "wrong", "value3")) == Blob("value2"));
  CHECK(h.Do(a, Get("/key1")) == Blob("value2"));
  // absent, expected empty: create with desired, reply desired
  CHECK(h.Do(a, CompareSet("/cs_new", "", "created")) == Blob("created"));
  CHECK(h.Do(a, Get("/cs_new")) == Blob("created"));
  // absent, expected non-empty: store nothing, reply expected
  CHECK(h.Do(a, CompareSet("/cs_missing", "x", "y")) == Blob("x"));
  CHECK(h.Do(a, Check({"/cs_missing"})) == kNotReady);
}

TEST_CASE("CHECK never blocks", "[store]") {
  Harness h;
  const ConnId a = h.Open();
  h.Do(a, Set("/counter", "1"));
  h.Do(a, Set("/late", "x"));
  CHECK(h.Do(a, Check({"/counter", "/late"})) == kReady);
  CHECK(h.Do(a, Check({"/counter", "/absent"})) == kNotReady);
  CHECK(h.Do(a, Check({})) == kReady);
  CHECK_FALSE(h.store.IsParked(a));
}

TEST_CASE("WAIT: immediate, deferred, multi-key, and what wakes it", "[store]") {
  Harness h;
  const ConnId a = h.Open();
  const ConnId b = h.Open();
  h.Do(b, Set("/key1", "v"));
  SECTION("all present or no keys: reply at once") {
    CHECK(h.Do(a, Wait({"/key1"})) == kStop);
    CHECK(h.Do(a, Wait({})) == kStop);
    CHECK_FALSE(h.store.IsParked(a));
  }
  SECTION("one missing key, woken by SET") {
    CHECK(h.Do(a, Wait({"/late"})).empty());
    CHECK(h.store.IsParked(a));
    h.Do(b, Set("/late", "arrived"));
    CHECK(h.Take(a) == kStop);
    CHECK_FALSE(h.store.IsParked(a));
  }
  SECTION("two missing keys: one reply after the second") {
    CHECK(h.Do(a, Wait({"/w1", "/w2"})).empty());
    h.Do(b, Set("/w1", "1"));
    CHECK(h.Take(a).empty());
    h.Do(b, Set("/w2", "2"));
    CHECK(h.Take(a) == kStop);
  }
  SECTION("present keys are not re-checked, even if deleted meanwhile") {
    CHECK(h.Do(a, Wait({"/key1", "/w2"})).empty());
    h.Do(b, Del("/key1"));
    h.Do(b, Set("/w2", "x"));
    CHECK(h.Take(a) == kStop);
  }
  SECTION("woken by ADD, APPEND, MULTI_SET and COMPARE_SET creating the key") {
    const std::vector<std::pair<const char*, Request>> writers = {
        {"ADD", Add("/k", 1)},
        {"APPEND", Req(Op::kAppend, {"/k"}, {"x"})},
        {"MULTI_SET", Req(Op::kMultiSet, {"/other", "/k"}, {"1", "2"})},
        {"COMPARE_SET", CompareSet("/k", "", "x")},
        {"QUEUE_PUSH", Req(Op::kQueuePush, {"/k"}, {"x"})},
    };
    for (const auto& [name, writer] : writers) {
      INFO(name);
      h.Do(b, Del("/k"));
      h.Do(b, Req(Op::kQueuePop, {"/k"}));
      CHECK(h.Do(a, Wait({"/k"})).empty());
      h.Do(b, writer);
      CHECK(h.Take(a) == kStop);
    }
  }
  SECTION("DELETE_KEY, COMPARE_SET that stores nothing, GET and CHECK do not wake") {
    CHECK(h.Do(a, Wait({"/k"})).empty());
    h.Do(b, Del("/k"));
    h.Do(b, CompareSet("/k", "x", "y"));
    h.Do(b, Get("/k"));
    h.Do(b, Check({"/k"}));
    CHECK(h.Take(a).empty());
    CHECK(h.store.IsParked(a));
  }
  SECTION("the same key twice counts twice and one write satisfies both") {
    CHECK(h.Do(a, Wait({"/dup", "/dup"})).empty());
    h.Do(b, Set("/dup", "x"));
    CHECK(h.Take(a) == kStop);
  }
  SECTION("no server-side timeout: the WAIT stays parked across other traffic") {
    CHECK(h.Do(a, Wait({"/slow"})).empty());
    for (int i = 0; i < 100; ++i) h.Do(b, Set("/noise" + std::to_string(i), "x"));
    CHECK(h.store.IsParked(a));
  }
}

TEST_CASE("waiters are woken in arrival order", "[store]") {
  Harness h;
  std::vector<ConnId> waiters;
  for (int i = 0; i < 5; ++i) waiters.push_back(h.Open());
  const ConnId writer = h.Open();
  // Register in a shuffled order; wake order must be the registration order.
  const std::vector<ConnId> order = {waiters[3], waiters[0], waiters[4], waiters[1], waiters[2]};
  for (ConnId id : order) CHECK(h.Do(id, Wait({"/barrier"})).empty());
  h.Do(writer, Set("/barrier", "go"));
  CHECK(h.TakeOrder() == order);
  for (ConnId id : waiters) CHECK(h.Take(id) == kStop);
}

TEST_CASE("stale-WAIT trap: a new request drops the parked WAIT silently", "[store]") {
  Harness h;
  const ConnId c = h.Open();
  const ConnId b = h.Open();
  for (int i = 0; i < 12; ++i) h.Do(b, Set("/k" + std::to_string(i), "x"));
  CHECK(h.Do(c, Wait({"/never"})).empty());  // the 1.x client times out on its side
  // The next request gets its own, correct reply...
  CHECK(h.Do(c, NumKeys()) == I64(12));
  CHECK_FALSE(h.store.IsParked(c));
  // ...and setting the key later sends no stale STOP_WAITING.
  h.Do(b, Set("/never", "now"));
  CHECK(h.Take(c).empty());
  CHECK(h.Do(c, NumKeys()) == I64(13));
  SECTION("a new WAIT replaces the old one") {
    CHECK(h.Do(c, Wait({"/a"})).empty());
    CHECK(h.Do(c, Wait({"/b"})).empty());
    h.Do(b, Set("/a", "x"));
    CHECK(h.Take(c).empty());
    h.Do(b, Set("/b", "x"));
    CHECK(h.Take(c) == kStop);
  }
}

TEST_CASE("CANCEL_WAIT corner cases (spec section 5)", "[store]") {
  Harness h;
  const ConnId a = h.Open();
  const ConnId b = h.Open();
  SECTION("nothing parked: WAIT_CANCELED") { CHECK(h.Do(a, Cancel()) == kCanceled); }
  SECTION("parked on a missing key: WAIT_CANCELED only, and a later SET sends nothing") {
    CHECK(h.Do(a, Wait({"/cw1"})).empty());
    CHECK(h.Do(a, Cancel()) == kCanceled);
    CHECK_FALSE(h.store.IsParked(a));
    h.Do(b, Set("/cw1", "x"));
    CHECK(h.Take(a).empty());
  }
  SECTION("already answered, then cancel: STOP_WAITING then WAIT_CANCELED") {
    CHECK(h.Do(a, Wait({"/cw2"})).empty());
    h.Do(b, Set("/cw2", "x"));
    CHECK(h.Take(a) == kStop);
    CHECK(h.Do(a, Cancel()) == kCanceled);
  }
  SECTION("two keys, one set, cancel, then the second set: nothing more") {
    CHECK(h.Do(a, Wait({"/cw3", "/cw4"})).empty());
    h.Do(b, Set("/cw3", "x"));
    CHECK(h.Do(a, Cancel()) == kCanceled);
    h.Do(b, Set("/cw4", "x"));
    CHECK(h.Take(a).empty());
    CHECK(h.Do(a, NumKeys()) == I64(2));
  }
  SECTION("many wait/cancel cycles leave no live registration behind") {
    for (int i = 0; i < 1000; ++i) {
      CHECK(h.Do(a, Wait({"/spin"})).empty());
      CHECK(h.Do(a, Cancel()) == kCanceled);
    }
    const ConnId c = h.Open();
    CHECK(h.Do(c, Wait({"/spin"})).empty());  // one live waiter behind 1000 stale ones
    h.Do(b, Set("/spin", "x"));
    CHECK(h.Take(a).empty());
    CHECK(h.Take(c) == kStop);
  }
  SECTION("a closed connection's WAIT is forgotten") {
    CHECK(h.Do(a, Wait({"/gone"})).empty());
    h.store.Close(a);
    h.Do(b, Set("/gone", "x"));
    CHECK(h.TakeOrder().empty());
  }
}

TEST_CASE("GETNUMKEYS and DELETE_KEY", "[store]") {
  Harness h;
  const ConnId a = h.Open();
  CHECK(h.Do(a, Add("init/", 1)) == I64(1));
  h.Do(a, Set("/key1", "v"));
  CHECK(h.Do(a, NumKeys()) == I64(2));  // init/ counts too
  CHECK(h.Do(a, Del("/key1")) == I64(1));
  CHECK(h.Do(a, Del("/key1")) == I64(0));
  CHECK(h.Do(a, NumKeys()) == I64(1));
  CHECK(h.Do(a, Get("/key1")) == Blob(""));
}

TEST_CASE("APPEND, MULTI_GET, MULTI_SET, PING and VALIDATE", "[store]") {
  Harness h;
  const ConnId a = h.Open();
  CHECK(h.Do(a, Req(Op::kAppend, {"/app"}, {"abc"})).empty());
  CHECK(h.Do(a, Req(Op::kAppend, {"/app"}, {"def"})).empty());
  CHECK(h.Do(a, Get("/app")) == Blob("abcdef"));
  CHECK(h.Do(a, Req(Op::kMultiSet, {"/m1", "/m2"}, {"one", "two"})).empty());
  CHECK(h.Do(a, Req(Op::kMultiGet, {"/m2", "/m1", "/app"})) ==
        Blob("two") + Blob("one") + Blob("abcdef"));
  CHECK(h.Do(a, Req(Op::kMultiGet, {})).empty());  // zero values are zero bytes
  // Missing key: an empty blob in its place (libuv), not a partial reply and a close.
  CHECK(h.Do(a, Req(Op::kMultiGet, {"/m1", "/nope", "/m2"})) ==
        Blob("one") + Blob("") + Blob("two"));
  CHECK(h.Do(a, Req(Op::kValidate, {}, {}, 0, kValidateMagic)).empty());
  CHECK(ToHex(h.Do(a, Req(Op::kPing, {}, {}, 0, 13681))) == "71350000");
  CHECK(h.closed.empty());
}

TEST_CASE("WATCH_KEY: ack and events as the 1.13 server sends them", "[store]") {
  Harness h;
  const ConnId watcher = h.Open();
  const ConnId b = h.Open();
  CHECK(ToHex(h.Do(watcher, Req(Op::kWatchKey, {"/watched"}))) == "03");
  h.Do(b, Set("/watched", "one"));
  CHECK(ToHex(h.Take(watcher)) ==
        "0108000000000000002f77617463686564000000000000000003000000000000006f6e65");
  h.Do(b, Set("/watched", "two"));
  CHECK(ToHex(h.Take(watcher)) ==
        "0008000000000000002f7761746368656403000000000000006f6e65030000000000000074776f");
  CHECK(h.Do(b, CompareSet("/watched", "two", "three")) == Blob("three"));
  CHECK(ToHex(h.Take(watcher)) ==
        "0008000000000000002f77617463686564030000000000000074776f05000000000000007468726565");
  h.Do(b, Add("/watched_n", 1));
  CHECK(h.Take(watcher).empty());
  CHECK(h.Do(b, Del("/watched")) == I64(1));
  CHECK(ToHex(h.Take(watcher)) ==
        "0208000000000000002f77617463686564050000000000000074687265650000000000000000");
  // ADD on a watched key: created, then updated.
  h.Do(watcher, Req(Op::kWatchKey, {"/n"}));
  h.Do(b, Add("/n", 2));
  CHECK(h.Take(watcher) == FromHex("01") + Blob("/n") + Blob("") + Blob("2"));
  h.Do(b, Add("/n", 3));
  CHECK(h.Take(watcher) == FromHex("00") + Blob("/n") + Blob("2") + Blob("5"));
  // A closed watcher gets nothing.
  h.TakeOrder();
  h.store.Close(watcher);
  h.Do(b, Set("/n", "x"));
  CHECK(h.TakeOrder().empty());
}

TEST_CASE("queues: push, pop, len, and WAIT woken by one push", "[store]") {
  Harness h;
  const ConnId a = h.Open();
  const ConnId w1 = h.Open();
  const ConnId w2 = h.Open();
  CHECK(h.Do(a, Req(Op::kQueueLen, {"/q"})) == I64(0));
  CHECK(h.Do(a, Req(Op::kQueuePop, {"/q"})) == I64(0));  // empty: no blob follows
  CHECK(h.Do(w1, Wait({"/q"})).empty());
  CHECK(h.Do(w2, Wait({"/q"})).empty());
  CHECK(h.Do(a, Req(Op::kQueuePush, {"/q"}, {"v1"})).empty());
  CHECK(h.TakeOrder() == std::vector<ConnId>{w1});  // one waiter per push
  CHECK(h.Do(a, Check({"/q"})) == kReady);          // a non-empty queue counts as present
  CHECK(h.Do(a, Req(Op::kQueuePush, {"/q"}, {"v2"})).empty());
  CHECK(h.TakeOrder() == std::vector<ConnId>{w2});
  CHECK(h.Do(a, Req(Op::kQueueLen, {"/q"})) == I64(2));
  CHECK(h.Do(a, Req(Op::kQueuePop, {"/q"})) == I64(2) + Blob("v1"));
  CHECK(h.Do(a, Req(Op::kQueuePop, {"/q"})) == I64(1) + Blob("v2"));
  CHECK(h.Do(a, Req(Op::kQueuePop, {"/q"})) == I64(0));
  CHECK(h.Do(a, NumKeys()) == I64(0));  // queues are not keys
}

TEST_CASE("LIST returns the scope's keys sorted", "[store]") {
  Harness h;
  const ConnId a = h.Open();
  h.Do(a, Set("/b", "1"));
  h.Do(a, Set("/a", "2"));
  h.Do(a, Set("gculaunch/hidden", "3"));  // launcher namespace: not listed
  CHECK(h.Do(a, Req(Op::kList)) == I64(2) + Blob("/a") + Blob("/b"));
  const ConnId agent = h.Open(Scope::kLauncher);
  CHECK(h.Do(agent, Req(Op::kList)) == I64(1) + Blob("hidden"));
}

TEST_CASE("attempts: a new attempt drops old connections and keys", "[store][attempt]") {
  Harness h;
  const ConnId old_v1 = h.Open();
  const ConnId old_v2 = h.Open();
  const ConnId agent = h.Open(Scope::kLauncher);
  h.Do(old_v1, Set("//worker/attempt_0/default_pg/0/0/0", "blob"));
  h.Do(old_v2, Set("/default_pg/0//cpu//0/0", "blob"));
  h.Do(old_v2, Set("gculaunch/run_id", "r1"));  // prefixed: launcher namespace
  CHECK(h.Do(old_v2, Wait({"gculaunch/go"})).empty());
  CHECK(h.store.attempt() == 0);

  auto dropped = h.store.BeginAttempt(1);
  REQUIRE(dropped.ok());
  CHECK(*dropped == std::vector<ConnId>{old_v1, old_v2});
  CHECK(h.store.attempt() == 1);
  CHECK_FALSE(h.store.IsOpenForTest(old_v1));
  CHECK(h.store.IsOpenForTest(agent));

  // A dead rank's late bytes: refused, and they change nothing.
  CHECK(h.Do(old_v2, Set("/default_pg/0//cpu//0/0", "poison")).empty());
  CHECK_THAT(h.closed[old_v2], Catch::Contains("earlier restart attempt"));

  const ConnId fresh = h.Open();
  CHECK(h.Do(fresh, NumKeys()) == I64(0));
  CHECK(h.Do(fresh, Check({"/default_pg/0//cpu//0/0"})) == kNotReady);
  CHECK(h.Do(fresh, Check({"//worker/attempt_0/default_pg/0/0/0"})) == kNotReady);
  // Launcher keys survive, reachable by prefix from any connection and unprefixed from
  // launcher-scope connections.
  CHECK(h.Do(fresh, Get("gculaunch/run_id")) == Blob("r1"));
  CHECK(h.Do(agent, Get("run_id")) == Blob("r1"));
  CHECK(h.Do(agent, NumKeys()) == I64(1));
  // The old connection's WAIT on a launcher key is gone with it.
  h.Do(agent, Set("go", "1"));
  CHECK(h.TakeOrder().empty());
  CHECK(h.store.Find(Scope::kLauncher, "run_id") != nullptr);
  CHECK(h.store.Find(Scope::kAttempt, "gculaunch/run_id") != nullptr);
  CHECK(h.store.NumKeys(Scope::kAttempt) == 0);
}

TEST_CASE("attempts: node agents' socket connections survive a new attempt", "[store][attempt]") {
  Harness h;
  const ConnId agent = h.Open();    // first keyed request names only launcher keys
  const ConnId rank = h.Open();     // first keyed request is a worker key
  const ConnId mixed = h.Open();    // worker key first, launcher key later: still a rank
  const ConnId unkeyed = h.Open();  // only VALIDATE/PING so far: not decided yet
  h.Do(agent, Req(Op::kValidate));
  h.Do(agent, Set("gculaunch/job/node/1", "reg"));
  h.Do(rank, Set("/default_pg/0//cpu//0/0", "addr"));
  h.Do(mixed, Get("/x"));
  h.Do(mixed, Get("gculaunch/job/plan/0"));
  h.Do(unkeyed, Req(Op::kValidate));
  CHECK(h.store.IsAgentForTest(agent));
  CHECK_FALSE(h.store.IsAgentForTest(rank));
  CHECK_FALSE(h.store.IsAgentForTest(mixed));
  CHECK_FALSE(h.store.IsAgentForTest(unkeyed));
  // A parked WAIT of the agent on a launcher key survives the attempt change too.
  CHECK(h.Do(agent, Wait({"gculaunch/job/stop/1"})).empty());

  auto dropped = h.store.BeginAttempt(1);
  REQUIRE(dropped.ok());
  CHECK(*dropped == std::vector<ConnId>{rank, mixed, unkeyed});
  CHECK(h.store.IsOpenForTest(agent));
  const ConnId launcher = h.Open(Scope::kLauncher);
  h.Do(launcher, Set("job/stop/1", "marker"));
  CHECK(h.Take(agent) == kStop);
  CHECK(h.Do(agent, Get("gculaunch/job/stop/1")) == Blob("marker"));
  // An agent's unprefixed keys still address the (current) attempt namespace.
  h.Do(agent, Set("/y", "1"));
  CHECK(h.store.Find(Scope::kAttempt, "/y") != nullptr);
}

TEST_CASE("attempts must increase", "[store][attempt]") {
  Store store(3);
  CHECK(store.attempt() == 3);
  auto same = store.BeginAttempt(3);
  REQUIRE_FALSE(same.ok());
  CHECK_THAT(same.error().what, Catch::Contains("does not come after the current attempt 3"));
  CHECK_FALSE(store.BeginAttempt(1).ok());
  CHECK(store.BeginAttempt(4).ok());
}

TEST_CASE("attempt namespaces keep 1.x and 2.x workers apart from the launcher", "[store]") {
  Harness h;
  const ConnId worker = h.Open();
  const ConnId agent = h.Open(Scope::kLauncher);
  h.Do(worker, Set("/x", "worker"));
  h.Do(agent, Set("/x", "agent"));
  CHECK(h.Do(worker, Get("/x")) == Blob("worker"));
  CHECK(h.Do(agent, Get("/x")) == Blob("agent"));
  // A worker WAIT on a prefixed key is woken by the launcher's unprefixed write.
  CHECK(h.Do(worker, Wait({"gculaunch/ready"})).empty());
  h.Do(agent, Set("ready", "1"));
  CHECK(h.Take(worker) == kStop);
}

TEST_CASE("unknown connections and malformed in-process requests are refused", "[store]") {
  Harness h;
  CHECK(h.Do(99, NumKeys()).empty());
  CHECK(h.closed.count(99) == 1);
  const ConnId a = h.Open();
  CHECK(h.Do(a, Req(Op::kSet, {"/k"})).empty());  // no value
  CHECK_THAT(h.closed[a], Catch::Contains("malformed request SET"));
}

}  // namespace
}  // namespace gculaunch::rendezvous
