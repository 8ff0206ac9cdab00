#include "launcher/cluster/agent_link.h"

#include <netinet/in.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "rendezvous/listener.h"
#include "rendezvous/server.h"
#include "tests/support/test_util.h"

namespace gculaunch {
namespace {

struct Fixture {
  Fixture()
      : log_sink(std::make_shared<spdlog::sinks::ostream_sink_st>(log_text)),
        log("test", log_sink) {
    log_sink->set_pattern("%l: %v");
  }

  // A store on 127.0.0.1, port 0; `secret`: its job secret (none when empty).
  rendezvous::Server& StartServer(const std::string& secret = "") {
    auto socket = rendezvous::ListenSocket::Bind("127.0.0.1", 0);
    REQUIRE(socket.ok());
    rendezvous::ServerOptions options;
    options.agent_secret = secret;
    options.request_observer = [this](rendezvous::ConnId, const rendezvous::Request& r) {
      if (!r.keys.empty()) ++requests[std::string(rendezvous::OpName(r.op)) + " " + r.keys[0]];
    };
    server.emplace(io, std::move(*socket), std::move(options), log);
    return *server;
  }

  // Connects `link` and requires that it worked.
  void Connect(RemoteAgentLink& link) {
    std::optional<Status> connected;
    link.Connect([&](Status s) { connected = s; });
    REQUIRE(testing::RunUntil(io, [&] { return connected.has_value(); }));
    REQUIRE(connected->ok());
  }

  RemoteLinkOptions Options(int port) {
    RemoteLinkOptions o;
    o.host = "127.0.0.1";
    o.port = port;
    o.connect_timeout = std::chrono::seconds(20);
    o.initial_backoff = std::chrono::milliseconds(10);
    o.max_backoff = std::chrono::milliseconds(20);
    o.heartbeat_interval = std::chrono::milliseconds(10);
    return o;
  }

  boost::asio::io_context io;
  std::ostringstream log_text;
  std::shared_ptr<spdlog::sinks::ostream_sink_st> log_sink;
  spdlog::logger log;
  std::optional<rendezvous::Server> server;
  std::map<std::string, int> requests;  ///< "ADD key" -> how many the store decoded
};

// A port that refuses connections: bound (so nobody else takes it) but not listening.
struct RefusingPort {
  RefusingPort() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&in), sizeof in) == 0);
    socklen_t len = sizeof in;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&in), &len) == 0);
    port = ntohs(in.sin_port);
  }
  ~RefusingPort() { ::close(fd); }
  int fd = -1;
  int port = 0;
};

// A store on a thread of its own, whose loop the test can hold: a master whose gculaunch is
// stopped or starved.  Its kernel still takes the bytes; nobody answers until Release().
class HeldStore {
 public:
  HeldStore() : log_("held", std::make_shared<spdlog::sinks::null_sink_st>()) {
    auto socket = rendezvous::ListenSocket::Bind("127.0.0.1", 0);
    REQUIRE(socket.ok());
    server_.emplace(io_, std::move(*socket), rendezvous::ServerOptions{}, log_);
    port_ = server_->port();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~HeldStore() {
    Release();
    boost::asio::post(io_, [this] { server_->Stop(); });
    thread_.join();
  }
  int port() const { return port_; }

  /// Returns once the store's loop is held.
  void Hold() {
    std::unique_lock<std::mutex> lock(mu_);
    held_ = false;
    release_ = false;
    boost::asio::post(io_, [this] {
      std::unique_lock<std::mutex> inner(mu_);
      held_ = true;
      cv_.notify_all();
      cv_.wait(inner, [this] { return release_; });
    });
    REQUIRE(cv_.wait_for(lock, std::chrono::seconds(30), [this] { return held_; }));
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    release_ = true;
    cv_.notify_all();
  }

 private:
  boost::asio::io_context io_;
  spdlog::logger log_;
  std::optional<rendezvous::Server> server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  bool release_ = false;
};

}  // namespace

TEST_CASE("agent link: a master silent past the bound is lost, this node's own stall is not",
          "[agent_link]") {
  Fixture f;
  HeldStore store;
  RemoteLinkOptions o = f.Options(store.port());
  o.node_timeout = std::chrono::seconds(2);  // node 0 is lost after 2 s of silence
  o.silence_check = std::chrono::milliseconds(20);
  RemoteAgentLink link(f.io, o, f.log);
  std::optional<Status> connected;
  link.Connect([&](Status s) { connected = s; });
  REQUIRE(testing::RunUntil(f.io, [&] { return connected.has_value(); }));
  REQUIRE(connected->ok());
  std::optional<std::string> lost;
  link.StartHeartbeat("job/hb/1/1", [&](std::string what) { lost = what; });

  // The master does not answer for a while, and meanwhile this node's own loop stalls for
  // longer than the bound (a stopped or starved gculaunch): the answer waiting in the
  // socket is read on waking, and the stall is not counted as the master's silence.
  store.Hold();
  std::optional<Result<std::string>> got;
  link.Get("job/missing", [&](Result<std::string> r) { got = r; });
  boost::asio::steady_timer release(f.io);
  release.expires_after(std::chrono::milliseconds(100));
  release.async_wait([&](const boost::system::error_code&) {
    store.Release();
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // this loop stalls
  });
  REQUIRE(testing::RunUntil(f.io, [&] { return got.has_value(); }));
  CHECK(got->ok());
  CHECK_FALSE(lost.has_value());
  CHECK(f.log_text.str().find("has not answered") == std::string::npos);

  // Now the master stays silent with its connection up: lost once the bound passed.
  store.Hold();
  REQUIRE(testing::RunUntil(f.io, [&] { return lost.has_value(); }));
  CHECK_THAT(*lost, Catch::StartsWith("its gculaunch at 127.0.0.1:" + std::to_string(store.port()) +
                                      " went silent: nothing heard for "));
  CHECK_THAT(*lost, Catch::Contains("(the bound: --node-timeout 2 s)"));
  // Half-way there it said so, once.
  CHECK_THAT(f.log_text.str(),
             Catch::Contains("warning: the master node's gculaunch at 127.0.0.1:" +
                             std::to_string(store.port()) + " has not answered for "));
  std::optional<Status> after;
  link.Set("job/bye/1/1", "0", [&](Status s) { after = s; });
  REQUIRE(testing::RunUntil(f.io, [&] { return after.has_value(); }));
  CHECK_FALSE(after->ok());
  store.Release();
}

TEST_CASE("agent link: a remote node registers, waits, heartbeats and notices the master go",
          "[agent_link]") {
  Fixture f;
  rendezvous::Server& server = f.StartServer();
  RemoteAgentLink link(f.io, f.Options(server.port()), f.log);
  f.Connect(link);
  CHECK(link.local_address() == "127.0.0.1");
  CHECK(link.endpoint() == "127.0.0.1:" + std::to_string(server.port()));

  // Registration: the first writer wins, the second reads the first.
  std::optional<Result<std::string>> first, second;
  link.CompareSet("job/node/1", "", "mine", [&](Result<std::string> r) { first = r; });
  link.CompareSet("job/node/1", "", "theirs", [&](Result<std::string> r) { second = r; });
  REQUIRE(testing::RunUntil(f.io, [&] { return second.has_value(); }));
  REQUIRE(first->ok());
  CHECK(**first == "mine");
  REQUIRE(second->ok());
  CHECK(**second == "mine");
  CHECK(server.Get("job/node/1") == std::optional<std::string>("mine"));

  // The blocking wait is woken by the master's in-process write.
  std::optional<Result<std::string>> plan;
  link.WaitGet("job/plan/0", [&](Result<std::string> r) { plan = r; });
  boost::asio::post(f.io, [&] { server.Set("job/plan/0", "go"); });
  REQUIRE(testing::RunUntil(f.io, [&] { return plan.has_value(); }));
  REQUIRE(plan->ok());
  CHECK(**plan == "go");

  // Heartbeats bump job/hb/1 while the link is idle; an attempt change keeps the agent's
  // connections (they address only launcher keys).
  std::optional<std::string> lost;
  link.StartHeartbeat("job/hb/1/1", [&](std::string what) { lost = what; });
  REQUIRE(testing::RunUntil(
      f.io, [&] { return std::stoll(server.Get("job/hb/1/1").value_or("0")) >= 3; }));
  REQUIRE(server.BeginAttempt(1).ok());
  std::optional<Status> set;
  link.Set("job/done/0/1", "1", [&](Status s) { set = s; });
  REQUIRE(testing::RunUntil(f.io, [&] { return set.has_value(); }));
  CHECK(set->ok());
  CHECK_FALSE(lost.has_value());

  // The master's gculaunch goes away: noticed once, and later operations fail at once.
  std::optional<Result<std::string>> pending;
  link.WaitGet("job/stop/0", [&](Result<std::string> r) { pending = r; });
  boost::asio::post(f.io, [&] { server.Stop(); });
  REQUIRE(testing::RunUntil(f.io, [&] { return lost.has_value() && pending.has_value(); }));
  CHECK_THAT(*lost, Catch::StartsWith("the connection to its gculaunch at 127.0.0.1:" +
                                      std::to_string(server.port()) + " broke ("));
  REQUIRE_FALSE(pending->ok());
  std::optional<Status> after;
  link.Set("job/bye/1", "0", [&](Status s) { after = s; });
  REQUIRE(testing::RunUntil(f.io, [&] { return after.has_value(); }));
  CHECK_FALSE(after->ok());
}

TEST_CASE("agent link: the heartbeat reads a key as it beats, and only then", "[agent_link]") {
  Fixture f;
  rendezvous::Server& server = f.StartServer();
  RemoteAgentLink link(f.io, f.Options(server.port()), f.log);
  f.Connect(link);
  // Before any beat there is nothing to hand out: the caller reads the key itself.
  CHECK_FALSE(link.ReadAtBeat([](const Result<std::string>&) {}));

  link.StartHeartbeat(
      "job/hb/1/1", [](const std::string&) {}, "job/dumpreq");
  boost::asio::post(f.io, [&] { server.Set("job/dumpreq", "4"); });
  std::optional<std::string> read;
  REQUIRE(testing::RunUntil(f.io, [&] {
    if (!read) {
      link.ReadAtBeat([&](const Result<std::string>& r) {
        if (r.ok() && *r == "4") read = *r;
      });
    }
    return read.has_value();
  }));
  // Every beat carried one read, and nothing else read the key.
  const int beats = f.requests["ADD gculaunch/job/hb/1/1"];
  const int reads = f.requests["GET gculaunch/job/dumpreq"];
  CHECK(beats >= 1);
  CHECK((reads == beats || reads == beats - 1));  // the last pair may be half decoded

  // Stopped: the last read goes stale, never handed out again.
  link.StopHeartbeat();
  CHECK_FALSE(link.ReadAtBeat([](const Result<std::string>&) {}));
}

TEST_CASE("agent link: an unreachable master gives one clear error after the deadline",
          "[agent_link]") {
  Fixture f;
  RefusingPort refusing;
  RemoteLinkOptions options = f.Options(refusing.port);
  options.connect_timeout = std::chrono::milliseconds(600);
  options.progress_period = std::chrono::milliseconds(100);
  RemoteAgentLink link(f.io, options, f.log);
  std::optional<Status> connected;
  link.Connect([&](Status s) { connected = s; });
  REQUIRE(testing::RunUntil(f.io, [&] { return connected.has_value(); }));
  REQUIRE_FALSE(connected->ok());
  const Error& e = connected->error();
  const std::string where = "127.0.0.1:" + std::to_string(refusing.port);
  CHECK_THAT(e.what, Catch::StartsWith("could not reach the master node's gculaunch at "
                                       "MASTER_ADDR:MASTER_PORT " +
                                       where + " after "));
  CHECK_THAT(e.what, Catch::Contains(" attempts in "));
  CHECK_THAT(e.what, Catch::Contains("--rdzv-timeout 0.6 s"));
  CHECK_THAT(e.what, Catch::Contains("Connection refused"));
  CHECK_THAT(e.hint, Catch::Contains("no firewall blocks the port"));
  CHECK(e.Format().find('\n') == std::string::npos);
  // Progress lines while it waited: whom, the resolved address, attempts, elapsed time.
  CHECK_THAT(f.log_text.str(), Catch::Contains("waiting for the master node at " + where +
                                               " (resolved to "
                                               "127.0.0.1): "));
  CHECK_THAT(f.log_text.str(), Catch::Contains("node 0 may still be starting"));
}

// Connects a link with `secret` to a store with `server_secret`; the outcome of Connect.
Status ConnectWithSecrets(const std::string& server_secret, const std::string& secret) {
  Fixture f;
  rendezvous::Server& server = f.StartServer(server_secret);
  RemoteLinkOptions options = f.Options(server.port());
  options.secret = secret;
  RemoteAgentLink link(f.io, options, f.log);
  std::optional<Status> connected;
  link.Connect([&](Status s) { connected = s; });
  REQUIRE(testing::RunUntil(f.io, [&] { return connected.has_value(); }));
  if (connected->ok()) {
    // A proven link writes the launcher's keys.
    std::optional<Status> set;
    link.Set("job/stop/0", "marker", [&](Status s) { set = s; });
    REQUIRE(testing::RunUntil(f.io, [&] { return set.has_value(); }));
    CHECK(set->ok());
    CHECK(server.Get("job/stop/0") == "marker");
  }
  if (!secret.empty()) CHECK(f.log_text.str().find(secret) == std::string::npos);
  return *connected;
}

TEST_CASE("agent link: the job secret, the same, different or on one side only", "[agent_link]") {
  CHECK(ConnectWithSecrets("", "").ok());
  CHECK(ConnectWithSecrets("s3cret", "s3cret").ok());
  const Status wrong = ConnectWithSecrets("s3cret", "other");
  REQUIRE_FALSE(wrong.ok());
  // Node 0 proves itself first: its proof is what fails (issue 43).
  CHECK_THAT(wrong.error().what, Catch::Contains("failed to prove that it holds the job secret"));
  CHECK(wrong.error().exit_code == 2);
  const Status none = ConnectWithSecrets("s3cret", "");
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.error().what, Catch::Contains("requires a job secret, but this node has none"));
  CHECK(none.error().exit_code == 2);
  const Status only_here = ConnectWithSecrets("", "s3cret");
  REQUIRE_FALSE(only_here.ok());
  CHECK_THAT(only_here.error().what,
             Catch::Contains("runs without a job secret, but this node has one"));
  CHECK(only_here.error().exit_code == 2);
}

TEST_CASE("agent link: node 0 reaches its own store in-process", "[agent_link]") {
  Fixture f;
  rendezvous::Server& server = f.StartServer();
  LocalAgentLink link(f.io, server);
  std::optional<Result<std::string>> cas, got, waited;
  link.CompareSet("job/node/0", "", "reg", [&](Result<std::string> r) { cas = r; });
  CHECK_FALSE(cas.has_value());  // never inline
  link.WaitGet("job/plan/0", [&](Result<std::string> r) { waited = r; });
  link.Set("job/plan/0", "plan", [](Status) {});
  link.Get("job/missing", [&](Result<std::string> r) { got = r; });
  REQUIRE(testing::RunUntil(f.io, [&] { return cas && got && waited; }));
  CHECK(**cas == "reg");
  CHECK(**got == "");
  CHECK(**waited == "plan");
  // Socket clients see the same keys under the prefix.
  CHECK(server.store().Find(rendezvous::Scope::kAttempt, "gculaunch/job/node/0") != nullptr);
}

}  // namespace gculaunch
