// Tests of rendezvous/server.h on loopback port 0: both dialects end to end, garbage on one
// connection never disturbs another's pending WAIT, Stop() with live clients lets run()
// return, the connection bound, EMFILE survival, restart attempts, close-on-exec sockets,
// large values and pipelining, and the in-process launcher API.
#include "rendezvous/server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <memory>
#include <set>

#include "tests/rendezvous/decode_util.h"
#include "tests/rendezvous/server_test_util.h"

extern char** environ;

namespace gculaunch::rendezvous {
namespace {

using testing::FromHex;
using testing::kHandshake;
using testing::RawClient;
using testing::Req;
using testing::ServerFixture;
using testing::ToHex;
using testing::V1;
using testing::V2;

std::int64_t AsI64(const std::string& bytes) {
  return static_cast<std::int64_t>(LoadU64(reinterpret_cast<const std::uint8_t*>(bytes.data())));
}

TEST_CASE("server: both dialects on one port", "[server]") {
  ServerFixture f;
  RawClient v1(f.port());
  RawClient v2(f.port());
  v1.Send(V1(Req(Op::kAdd, {"init/"}, {}, 1)));
  CHECK(AsI64(v1.Read(8)) == 1);
  v2.Send(kHandshake + V2(Req(Op::kPing, {}, {}, 0, 4321)));
  CHECK(ToHex(v2.Read(4)) == "e1100000");
  v2.Send(V2(Req(Op::kAdd, {"init/"}, {}, 1)));
  CHECK(AsI64(v2.Read(8)) == 2);
  // Pipelined in one write: SET + GET + GETNUMKEYS + PING.
  v2.Send(V2(Req(Op::kSet, {"/p"}, {"p"})) + V2(Req(Op::kGet, {"/p"})) + V2(Req(Op::kGetNumKeys)) +
          V2(Req(Op::kPing, {}, {}, 0, 7)));
  CHECK(ToHex(v2.Read(9 + 8 + 4)) ==
        "010000000000000070"
        "0200000000000000"
        "07000000");
  // A silent connection (the 1.x callback socket) is simply kept.
  RawClient silent(f.port());
  v1.Send(V1(Req(Op::kGetNumKeys)));
  CHECK(AsI64(v1.Read(8)) == 2);
  CHECK(f.OnIo([&] { return f.server().num_sessions(); }) == 3);
}

TEST_CASE("server: garbage on one connection does not disturb another's pending WAIT", "[server]") {
  ServerFixture f;
  RawClient waiter(f.port());
  waiter.Send(V1(Req(Op::kWait, {"/k"})));
  const ConnId waiter_id = f.WaitForRequest(Op::kWait);
  REQUIRE(f.OnIo([&] { return f.server().store().IsParked(waiter_id); }));

  struct Bad {
    const char* name;
    std::string bytes;
    const char* reason;
  };
  std::string huge_key = FromHex("02") + std::string(8, '\xff');  // GET, key length 2^64-1
  const std::vector<Bad> cases = {
      {"unknown v1 code", FromHex("0909000000000000002f7768617465766572"),
       "malformed input at byte 0: unknown query code 0x09"},
      {"over-limit key", huge_key, "malformed input at byte 1: GET key length"},
      {"second VALIDATE", kHandshake + kHandshake, "at byte 5: VALIDATE is only allowed"},
      {"garbage after good requests", V1(Req(Op::kGetNumKeys)) + FromHex("ff"),
       "at byte 1: unknown query code 0xFF"},
      {"ADD on a non-number",
       V1(Req(Op::kSet, {"/nan"}, {"abc"})) + V1(Req(Op::kAdd, {"/nan"}, {}, 1)),
       "is not a number"},
  };
  for (const Bad& bad : cases) {
    INFO(bad.name);
    RawClient garbage(f.port());
    const std::string peer = garbage.LocalName();
    garbage.Send(bad.bytes);
    CHECK(f.log().WaitFor({"closing connection", peer, bad.reason}));
    // The server flushes replies that came before the bad bytes, then closes.
    if (std::string(bad.name) == "garbage after good requests") CHECK(garbage.Read(8).size() == 8);
    CHECK(garbage.ReadsEof());
    CHECK(f.OnIo([&] { return f.server().store().IsParked(waiter_id); }));
  }
  CHECK(waiter.NothingPending());
  RawClient setter(f.port());
  setter.Send(V1(Req(Op::kSet, {"/k"}, {"v"})));
  CHECK(ToHex(waiter.Read(1)) == "00");
  // Exactly one log line per bad connection.
  int closing_lines = 0;
  for (const auto& line : f.log().Lines()) closing_lines += line.find("closing connection") == 0;
  CHECK(closing_lines == static_cast<int>(cases.size()));
}

TEST_CASE("server: Stop() with live clients makes run() return", "[server]") {
  ServerFixture f;
  RawClient idle(f.port());
  RawClient parked(f.port());
  RawClient half(f.port());
  RawClient v2(f.port());
  parked.Send(V1(Req(Op::kWait, {"/never"})));
  half.Send(V1(Req(Op::kSet, {"/k"}, {"value"})).substr(0, 12));  // half a SET
  v2.Send(kHandshake + V2(Req(Op::kPing, {}, {}, 0, 1)));
  CHECK(v2.Read(4).size() == 4);
  f.WaitForRequest(Op::kWait);
  bool waited = false;
  f.OnIo([&] {
    f.server().AsyncWait({"never"}, [&](bool ok) { waited = !ok; });
    return 0;
  });
  CHECK(f.OnIo([&] { return f.server().num_sessions(); }) == 4);
  f.OnIo([&] {
    f.server().Stop();
    return 0;
  });
  CHECK(f.WaitStopped());  // io_context::run() returned by itself
  CHECK(waited);           // the in-process wait completed with false
  CHECK(idle.ReadsEof());
  CHECK(parked.ReadsEof());
  CHECK(half.ReadsEof());
  CHECK(v2.ReadsEof());
  CHECK(f.server().stopped());
}

TEST_CASE("server: connections beyond the bound are closed with a log line", "[server]") {
  ServerOptions options;
  options.max_connections = 2;
  ServerFixture f(options);
  RawClient a(f.port());
  RawClient b(f.port());
  a.Send(V1(Req(Op::kGetNumKeys)));
  b.Send(V1(Req(Op::kGetNumKeys)));
  CHECK(a.Read(8).size() == 8);
  CHECK(b.Read(8).size() == 8);
  RawClient c(f.port());
  CHECK(c.ReadsEof());
  CHECK(f.log().Contains({"refusing connection from", c.LocalName(), "the limit is 2"}));
  // The two admitted connections still work, and a slot frees up when one leaves.
  a.Send(V1(Req(Op::kGetNumKeys)));
  CHECK(a.Read(8).size() == 8);
  {
    RawClient gone(f.port());  // refused too
    CHECK(gone.ReadsEof());
  }
  const std::string b_name = b.LocalName();
  ::shutdown(b.fd(), SHUT_RDWR);
  CHECK(b.ReadsEof());
  CHECK(f.log().WaitFor({"from " + b_name + " ended"}));
  RawClient d(f.port());
  d.Send(V1(Req(Op::kGetNumKeys)));
  CHECK(d.Read(8).size() == 8);
}

// A client from 127.0.0.2, which the test's ServerOptions::foreign_peer calls another user's.
std::unique_ptr<RawClient> Stranger(std::uint16_t port) {
  auto c = std::make_unique<RawClient>(port, false);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1);
  REQUIRE(::bind(c->fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  c->Connect();
  return c;
}

bool FromStranger(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  return ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
         addr.sin_family == AF_INET && ntohl(addr.sin_addr.s_addr) == INADDR_LOOPBACK + 1;
}

TEST_CASE("server: at the cap, other users' connections make room for the job's", "[server]") {
  ServerOptions options;
  options.max_connections = 2;
  options.foreign_peer = FromStranger;
  ServerFixture f(options);
  auto a = Stranger(f.port());
  auto b = Stranger(f.port());
  for (auto* c : {a.get(), b.get()}) {
    c->Send(V1(Req(Op::kGetNumKeys)));
    CHECK(c->Read(8).size() == 8);
  }
  // The job's client takes the slot of the oldest stranger, idle or not.
  RawClient own(f.port());
  own.Send(V1(Req(Op::kGetNumKeys)));
  CHECK(own.Read(8).size() == 8);
  CHECK(a->ReadsEof());
  CHECK(f.log().WaitFor({"this one belongs to another local user than the job's and root"}));
  // A new stranger finds no room: refused, and the job's connection stays.
  auto c = Stranger(f.port());
  CHECK(c->ReadsEof());
  CHECK(f.log().WaitFor({"whose connections are refused first"}));
  RawClient second(f.port());  // evicts b, the last stranger
  second.Send(V1(Req(Op::kGetNumKeys)));
  CHECK(second.Read(8).size() == 8);
  CHECK(b->ReadsEof());
  // With only the job's connections at the cap, a new one is refused as before.
  RawClient third(f.port());
  CHECK(third.ReadsEof());
  own.Send(V1(Req(Op::kGetNumKeys)));
  CHECK(own.Read(8).size() == 8);
}

// Restores RLIMIT_NOFILE and closes the filler fds on scope exit.
struct FdExhaustion {
  rlimit saved{};
  std::vector<int> fillers;
  FdExhaustion() {
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
    int highest = 0;
    for (int fd = 0; fd < 4096; ++fd) {
      if (::fcntl(fd, F_GETFD) >= 0) highest = fd;
    }
    rlimit low = saved;
    low.rlim_cur = static_cast<rlim_t>(highest + 32);
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
    while (true) {
      const int fd = ::dup(0);
      if (fd < 0) break;
      fillers.push_back(fd);
    }
  }
  void Release() {
    for (int fd : fillers) ::close(fd);
    fillers.clear();
    ::setrlimit(RLIMIT_NOFILE, &saved);
  }
  ~FdExhaustion() { Release(); }
};

TEST_CASE("server: survives running out of file descriptors", "[server]") {
  ServerOptions options;
  options.accept_retry_delay = std::chrono::milliseconds(20);
  ServerFixture f(options);
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 3; ++i) clients.push_back(std::make_unique<RawClient>(f.port(), false));
  {
    FdExhaustion exhausted;
    REQUIRE(!exhausted.fillers.empty());
    for (auto& c : clients) c->Connect();  // the kernel queues them; accept4 gets EMFILE
    CHECK(f.log().WaitFor({"cannot accept store connections", "retrying every 20 ms"}));
    exhausted.Release();
  }
  // The acceptor survived: all three are served once descriptors are available again.
  for (auto& c : clients) {
    c->Send(V1(Req(Op::kGetNumKeys)));
    CHECK(AsI64(c->Read(8)) == 0);
  }
  CHECK(f.OnIo([&] { return f.server().num_sessions(); }) == 3);
}

TEST_CASE("server: a new attempt closes old connections, old keys and the backlog",
          "[server][attempt]") {
  ServerFixture f;
  RawClient old_rank(f.port());
  old_rank.Send(V1(Req(Op::kSet, {"/default_pg/0//cpu//0/0"}, {"old"})) +
                V1(Req(Op::kSet, {"gculaunch/run"}, {"r1"})) + V1(Req(Op::kGetNumKeys)));
  CHECK(AsI64(old_rank.Read(8)) == 1);

  // A connection that is still in the listen backlog when the attempt changes: the io
  // thread is held inside a handler while it connects and sends, and that same handler then
  // begins the attempt, so the acceptor cannot have taken it first.
  std::promise<void> connected;
  std::promise<Status> began;
  boost::asio::post(f.io(), [&] {
    if (connected.get_future().wait_for(testing::kHangGuard) != std::future_status::ready) {
      began.set_value(Error{"the test client did not connect", ""});
      return;
    }
    began.set_value(f.server().BeginAttempt(1));
  });
  RawClient late(f.port());
  late.Send(V1(Req(Op::kSet, {"/default_pg/0//cpu//0/0"}, {"poison"})));
  connected.set_value();
  auto began_future = began.get_future();
  REQUIRE(began_future.wait_for(testing::kHangGuard) == std::future_status::ready);
  const Status status = began_future.get();
  REQUIRE(status.ok());
  CHECK(old_rank.ReadsEof());
  CHECK(late.ReadsEof());
  CHECK(f.log().Contains({"restart attempt 1 begins", "closed 1 connections", "1 still waiting"}));

  RawClient fresh(f.port());
  fresh.Send(V1(Req(Op::kCheck, {"/default_pg/0//cpu//0/0"})) +
             V1(Req(Op::kGet, {"gculaunch/run"})));
  CHECK(ToHex(fresh.Read(1)) == "01");  // the old attempt's key is gone, poison never landed
  CHECK(fresh.Read(10) == FromHex("0200000000000000") + "r1");  // launcher keys survive
  CHECK(f.OnIo([&] { return f.server().attempt(); }) == 1);
  CHECK_FALSE(f.OnIo([&] { return f.server().BeginAttempt(1).ok(); }));
}

TEST_CASE("server: the connection observer hears of connections the peer ended",
          "[server][attempt]") {
  std::mutex mu;
  std::vector<ConnId> ended;
  std::vector<std::string> why;
  std::promise<void> first_end;
  ServerOptions options;
  options.connection_observer = [&](ConnId id, const std::string& error) {
    std::lock_guard<std::mutex> lock(mu);
    ended.push_back(id);
    why.push_back(error);
    if (ended.size() == 1) first_end.set_value();
  };
  ServerFixture f(std::move(options));
  auto peer = std::make_unique<RawClient>(f.port());  // a node agent: survives the attempt
  peer->Send(V1(Req(Op::kGet, {"gculaunch/job/plan/0"})));
  CHECK(AsI64(peer->Read(8)) == 0);
  const ConnId peer_id = f.WaitForRequest(Op::kGet, 1);
  RawClient rank(f.port());
  rank.Send(V1(Req(Op::kGetNumKeys)));
  CHECK(AsI64(rank.Read(8)) == 0);
  // Closed by the server (a new attempt): not reported.
  REQUIRE(f.OnIo([&] { return f.server().BeginAttempt(1).ok(); }));
  CHECK(rank.ReadsEof());
  // Closed by the peer (its process died): reported with its id.
  peer.reset();
  REQUIRE(first_end.get_future().wait_for(testing::kHangGuard) == std::future_status::ready);
  f.OnIo([] { return 0; });
  std::lock_guard<std::mutex> lock(mu);
  CHECK(ended == std::vector<ConnId>{peer_id});
  CHECK(why == std::vector<std::string>{""});  // a clean close, not an I/O error
}

TEST_CASE("server: keepalive is turned on for one connection on request", "[server]") {
  ServerFixture f;
  RawClient agent(f.port());
  agent.Send(V1(Req(Op::kGet, {"gculaunch/job/plan/0"})));
  CHECK(AsI64(agent.Read(8)) == 0);
  const ConnId id = f.WaitForRequest(Op::kGet, 1);
  const auto keepalive_fds = [&] {
    int count = 0;
    for (int fd : f.server().NativeHandlesForTest()) {
      int on = 0;
      unsigned user_timeout = 0;
      socklen_t len = sizeof on;
      socklen_t ulen = sizeof user_timeout;
      if (::getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, &len) == 0 && on != 0 &&
          ::getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, &ulen) == 0 &&
          user_timeout == 5000) {
        ++count;
      }
    }
    return count;
  };
  CHECK(f.OnIo(keepalive_fds) == 0);
  CHECK(f.OnIo([&] { return f.server().KeepAlive(id, TcpKeepAlive{}); }));
  CHECK_FALSE(f.OnIo([&] { return f.server().KeepAlive(id + 1000, TcpKeepAlive{}); }));
  CHECK(f.OnIo(keepalive_fds) == 1);
}

TEST_CASE("server: a node agent connection outlives attempts, and in-process COMPARE_SET",
          "[server][attempt]") {
  ServerFixture f;
  RawClient agent(f.port());
  RawClient rank(f.port());
  agent.Send(V1(Req(Op::kSet, {"gculaunch/job/node/1"}, {"reg"})) + V1(Req(Op::kGetNumKeys)));
  CHECK(AsI64(agent.Read(8)) == 0);
  rank.Send(V1(Req(Op::kSet, {"/k"}, {"v"})) + V1(Req(Op::kGetNumKeys)));
  CHECK(AsI64(rank.Read(8)) == 1);
  REQUIRE(f.OnIo([&] { return f.server().BeginAttempt(1).ok(); }));
  CHECK(rank.ReadsEof());
  // The first writer of a marker wins; later writers read the winner.
  CHECK(f.OnIo([&] { return f.server().CompareSet("job/stop/0", "", "first"); }) == "first");
  CHECK(f.OnIo([&] { return f.server().CompareSet("job/stop/0", "", "second"); }) == "first");
  CHECK(f.OnIo([&] { return f.server().CompareSet("job/stop/0", "first", "third"); }) == "third");
  agent.Send(V1(Req(Op::kGet, {"gculaunch/job/stop/0"})));
  CHECK(agent.Read(13) == FromHex("0500000000000000") + "third");
  CHECK(f.OnIo([&] { return f.server().Get("job/node/1"); }) == std::optional<std::string>("reg"));
}

// The fds that a freshly exec'd child sees, as "socket:[inode]" / paths.
std::vector<std::string> ChildFdTargets() {
  int pipe_fds[2];
  REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  const char* argv[] = {"/bin/sh", "-c", "for f in /proc/$$/fd/*; do readlink \"$f\"; done",
                        nullptr};
  pid_t pid = 0;
  const int rc =
      ::posix_spawn(&pid, "/bin/sh", &actions, nullptr, const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  REQUIRE(rc == 0);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buf, sizeof buf)) > 0)
    out.append(buf, static_cast<std::size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < out.size()) {
    const std::size_t end = out.find('\n', start);
    lines.push_back(out.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return lines;
}

TEST_CASE("server: every socket is close-on-exec", "[server][cloexec]") {
  ServerFixture f;
  RawClient a(f.port());
  RawClient b(f.port());
  a.Send(V1(Req(Op::kGetNumKeys)));
  b.Send(V1(Req(Op::kGetNumKeys)));
  a.Read(8);
  b.Read(8);
  const std::vector<int> fds = f.OnIo([&] { return f.server().NativeHandlesForTest(); });
  REQUIRE(fds.size() == 3);  // the listener and two sessions
  std::set<std::string> inodes;
  for (int fd : fds) {
    INFO("fd " << fd);
    const int flags = ::fcntl(fd, F_GETFD);
    REQUIRE(flags >= 0);
    CHECK((flags & FD_CLOEXEC) != 0);
    struct stat st {};
    REQUIRE(::fstat(fd, &st) == 0);
    inodes.insert("socket:[" + std::to_string(st.st_ino) + "]");
  }
  // And a child that execs sees none of them.
  const auto seen = ChildFdTargets();
  REQUIRE(seen.size() >= 3);  // at least its stdin/stdout/stderr
  for (const auto& target : seen) CHECK(inodes.count(target) == 0);
}

TEST_CASE("server: large values and deep pipelines", "[server]") {
  ServerFixture f;
  RawClient c(f.port());
  std::string value(24u << 20, '\0');
  for (std::size_t i = 0; i < value.size(); ++i) value[i] = static_cast<char>(i * 131 % 253);
  c.Send(V1(Req(Op::kSet, {"/big"}, {value})) + V1(Req(Op::kGet, {"/big"})));
  const std::string reply = c.Read(8 + value.size());
  CHECK(AsI64(reply.substr(0, 8)) == static_cast<std::int64_t>(value.size()));
  CHECK(reply.compare(8, std::string::npos, value) == 0);

  // 300 pipelined GETs of a 64 KiB value (about 20 MB of replies) written by one thread
  // while this one reads: the server must keep order and not lose or stall anything.
  const std::string mid(64u << 10, 'm');
  c.Send(V1(Req(Op::kSet, {"/mid"}, {mid})));
  const std::string get = V1(Req(Op::kGet, {"/mid"}));
  std::thread writer([&] {
    std::string batch;
    for (int i = 0; i < 300; ++i) batch += get;
    c.Send(batch);
  });
  bool all_good = true;
  for (int i = 0; i < 300; ++i) {
    const std::string r = c.Read(8 + mid.size());
    all_good = all_good && AsI64(r.substr(0, 8)) == static_cast<std::int64_t>(mid.size()) &&
               r.compare(8, std::string::npos, mid) == 0;
  }
  writer.join();
  CHECK(all_good);
  c.Send(V1(Req(Op::kGetNumKeys)));
  CHECK(AsI64(c.Read(8)) == 2);
}

TEST_CASE("server: many waiters on one key are all woken", "[server]") {
  ServerFixture f;
  std::vector<std::unique_ptr<RawClient>> waiters;
  for (int i = 0; i < 50; ++i) {
    waiters.push_back(std::make_unique<RawClient>(f.port()));
    waiters.back()->Send(V1(Req(Op::kAdd, {"/arrived"}, {}, 1)) + V1(Req(Op::kWait, {"/go"})));
  }
  for (auto& w : waiters) w->Read(8);  // ADD replies
  f.WaitForRequest(Op::kWait, 50);
  RawClient setter(f.port());
  setter.Send(V1(Req(Op::kSet, {"/go"}, {"1"})));
  for (auto& w : waiters) CHECK(ToHex(w->Read(1)) == "00");
}

TEST_CASE("server: one value set in-process under many keys is shared, and stays apart",
          "[server]") {
  // Node 0 admits every node to the same plan: the keys share one copy of it, and a change
  // to one key (an APPEND by a client) reaches no other.
  ServerFixture f;
  f.OnIo([&] {
    f.server().Set("admit/1", "plan");
    f.server().Set("admit/2", "plan");
    f.server().Set("other", "else");
    return 0;
  });
  RawClient agent(f.port());
  agent.Send(kHandshake + V2(Req(Op::kAppend, {"gculaunch/admit/1"}, {"+"})) +
             V2(Req(Op::kGet, {"gculaunch/admit/2"})));
  CHECK(agent.Read(12) == FromHex("0400000000000000") + "plan");
  CHECK(f.OnIo([&] { return f.server().Get("admit/1"); }) == std::optional<std::string>("plan+"));
  CHECK(f.OnIo([&] { return f.server().Get("admit/2"); }) == std::optional<std::string>("plan"));
  CHECK(f.OnIo([&] { return f.server().Get("other"); }) == std::optional<std::string>("else"));
}

TEST_CASE("server: in-process access to the launcher namespace", "[server]") {
  ServerFixture f;
  f.OnIo([&] {
    f.server().Set("run_id", "abc");
    return 0;
  });
  CHECK(f.OnIo([&] { return f.server().Get("run_id"); }) == std::optional<std::string>("abc"));
  CHECK(f.OnIo([&] { return f.server().Get("missing"); }) == std::nullopt);
  CHECK(f.OnIo([&] { return *f.server().Add("count", 5); }) == 5);
  CHECK(f.OnIo([&] { return f.server().Check({"run_id", "count"}); }));
  CHECK_FALSE(f.OnIo([&] { return f.server().Check({"nope"}); }));
  auto bad = f.OnIo([&] { return f.server().Add("run_id", 1); });
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().what, Catch::Contains("is not a number"));

  // A socket client (a node agent) sees the same keys under the prefix, and can wake an
  // in-process wait.
  RawClient agent(f.port());
  agent.Send(V1(Req(Op::kGet, {"gculaunch/run_id"})));
  CHECK(agent.Read(11) == FromHex("0300000000000000") + "abc");
  std::promise<bool> woken;
  f.OnIo([&] {
    f.server().AsyncWait({"ready"}, [&](bool ok) { woken.set_value(ok); });
    return 0;
  });
  auto woken_future = woken.get_future();
  agent.Send(V1(Req(Op::kSet, {"gculaunch/ready"}, {"1"})));
  REQUIRE(woken_future.wait_for(testing::kHangGuard) == std::future_status::ready);
  CHECK(woken_future.get());
  CHECK(f.OnIo([&] { return f.server().DeleteKey("ready"); }));
  CHECK_FALSE(f.OnIo([&] { return f.server().DeleteKey("ready"); }));
  // Attempt keys are not visible in-process, and survive nothing: they are the workers'.
  agent.Send(V1(Req(Op::kSet, {"/worker_key"}, {"1"})) + V1(Req(Op::kGetNumKeys)));
  CHECK(AsI64(agent.Read(8)) == 1);
  CHECK(f.OnIo([&] { return f.server().Get("/worker_key"); }) == std::nullopt);
}

}  // namespace
}  // namespace gculaunch::rendezvous
