// Tests of rendezvous/session.h with a fake owner: request order and batching, the close
// paths (malformed input, owner close, peer EOF) and output flow control.
#include "rendezvous/session.h"

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <catch2/catch.hpp>

#include "tests/rendezvous/decode_util.h"
#include "tests/rendezvous/server_test_util.h"

namespace gculaunch::rendezvous {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using testing::Encode;
using testing::RawClient;
using testing::Req;

// Answers every request with `reply_size` bytes of its first key's first byte (or 'x').
class FakeOwner final : public SessionOwner {
 public:
  void OnRequest(Session& session, Request& request) override {
    const char fill = request.keys.empty() || request.keys[0].empty() ? 'x' : request.keys[0][0];
    session.output().Append(std::string(reply_size, fill));
    if (request.op == Op::kDeleteKey) session.CloseAfterFlush("owner asked to close");
    std::lock_guard<std::mutex> lock(mu);
    ops.push_back(request.op);
  }
  void OnSessionEnd(Session&) override { ++ends; }
  void WarnClose(const Session& session, const std::string& reason) override {
    log->warn("closing connection {} from {}: {}", session.id(), session.peer(), reason);
  }
  void OnOverBudget() override { ++over_budget; }

  std::size_t Count() {
    std::lock_guard<std::mutex> lock(mu);
    return ops.size();
  }

  std::size_t reply_size = 1;
  std::mutex mu;
  std::vector<Op> ops;
  std::atomic<int> ends{0};
  std::atomic<int> over_budget{0};
  spdlog::logger* log = nullptr;
};

// One Session on an accepted loopback socket; the io_context runs on a background thread.
class SessionFixture {
 public:
  explicit SessionFixture(int server_sndbuf = 0, int client_rcvbuf = 0)
      : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        client_(acceptor_.local_endpoint().port(), false) {
    sink_ = std::make_shared<testing::CaptureSink>();
    log_ = std::make_unique<spdlog::logger>("session-test", sink_);
    owner_.log = log_.get();
    if (client_rcvbuf > 0) {
      ::setsockopt(client_.fd(), SOL_SOCKET, SO_RCVBUF, &client_rcvbuf, sizeof client_rcvbuf);
    }
    client_.Connect();
    tcp::socket socket(io_);
    acceptor_.accept(socket);
    if (server_sndbuf > 0) {
      ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_SNDBUF, &server_sndbuf,
                   sizeof server_sndbuf);
    }
    session_ =
        std::make_shared<Session>(std::move(socket), 7, "test-peer", Limits{}, owner_, *log_);
    session_->Start();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~SessionFixture() {
    asio::post(io_, [this] { session_->Close(); });
    work_.reset();
    thread_.join();
  }

  template <typename F>
  void OnIo(F f) {
    std::promise<void> done;
    asio::post(io_, [&] {
      f();
      done.set_value();
    });
    REQUIRE(done.get_future().wait_for(testing::kHangGuard) == std::future_status::ready);
  }

  RawClient& client() { return client_; }
  FakeOwner& owner() { return owner_; }
  Session& session() { return *session_; }
  testing::CaptureSink& log() { return *sink_; }

 private:
  asio::io_context io_;
  // Keeps run() going after the session ended, so that OnIo still works.
  asio::executor_work_guard<asio::io_context::executor_type> work_ = asio::make_work_guard(io_);
  tcp::acceptor acceptor_;
  RawClient client_;
  std::shared_ptr<testing::CaptureSink> sink_;
  std::unique_ptr<spdlog::logger> log_;
  FakeOwner owner_;
  std::shared_ptr<Session> session_;
  std::thread thread_;
};

std::string V1(const Request& r) { return Encode(Dialect::kV1, r); }

TEST_CASE("session: pipelined requests are handled in order", "[session]") {
  SessionFixture f;
  f.client().Send(V1(Req(Op::kGet, {"a"})) + V1(Req(Op::kGet, {"b"})) + V1(Req(Op::kGetNumKeys)) +
                  V1(Req(Op::kGet, {"c"})));
  CHECK(f.client().Read(4) == "abxc");
  // A request split across writes.
  const std::string split = V1(Req(Op::kGet, {"dd"}));
  f.client().Send(split.substr(0, 3));
  f.client().Send(split.substr(3));
  CHECK(f.client().Read(1) == "d");
  CHECK(f.owner().Count() == 5);
}

TEST_CASE("session: malformed input flushes earlier replies, logs once, ends once", "[session]") {
  SessionFixture f;
  f.client().Send(V1(Req(Op::kGet, {"a"})) + std::string(1, '\x42'));
  CHECK(f.client().Read(1) == "a");
  CHECK(f.client().ReadsEof());
  CHECK(f.log().WaitFor({"closing connection 7 from test-peer",
                         "malformed input at byte 10: unknown query code 0x42"}));
  f.OnIo([] {});
  CHECK(f.owner().ends == 1);
  CHECK(f.log().Lines().size() == 1);
}

TEST_CASE("session: the owner can close after the reply", "[session]") {
  SessionFixture f;
  f.client().Send(V1(Req(Op::kDeleteKey, {"z"})) + V1(Req(Op::kGet, {"never"})));
  CHECK(f.client().Read(1) == "z");
  CHECK(f.client().ReadsEof());
  f.OnIo([] {});
  CHECK(f.owner().ends == 1);
  CHECK(f.owner().Count() == 1);  // the GET after the close was not handled
}

TEST_CASE("session: Close() by the owner does not call it back, but EOF does", "[session]") {
  SECTION("owner close") {
    SessionFixture f;
    f.OnIo([&] { f.session().Close(); });
    CHECK(f.client().ReadsEof());
    CHECK(f.owner().ends == 0);
    CHECK(f.session().closed());
  }
  SECTION("peer EOF") {
    SessionFixture f;
    ::shutdown(f.client().fd(), SHUT_WR);
    CHECK(f.client().ReadsEof());
    f.OnIo([] {});
    CHECK(f.owner().ends == 1);
  }
}

TEST_CASE("session: stops decoding while output is above the high-water mark", "[session]") {
  // Tiny socket buffers, so the kernel cannot absorb the replies; each reply is half the
  // high-water mark, so the third request pushes the queue over it.
  SessionFixture f(4096, 4096);
  f.owner().reply_size = Session::kOutputHighWater / 2;
  std::string requests;
  for (int i = 0; i < 20; ++i) requests += V1(Req(Op::kGet, {"r"}));
  f.client().Send(requests);
  // Wait until three were handled; the io thread then finishes that read's processing.
  for (int spins = 0; f.owner().Count() < 3; ++spins) {
    f.OnIo([] {});
    REQUIRE(spins < 100000);
  }
  f.OnIo([] {});
  CHECK(f.owner().Count() == 3);  // paused: the rest wait in the read buffer
  // Reading the replies lets it go on, in order, to the end.
  const std::string all = f.client().Read(20 * f.owner().reply_size);
  CHECK(all == std::string(all.size(), 'r'));
  CHECK(f.owner().Count() == 20);
}

}  // namespace
}  // namespace gculaunch::rendezvous
