// store_load: many TCPStore client connections in one process, for bench/store.py.
//
//   store_load --host H --port P --clients N [--dialect v1|v2] [--connect-timeout S]
//
// Connects N clients (rendezvous/client.h) concurrently on one io_context thread, prints
//   {"event": "connected", "t_begin": T, "t_end": T, "failed": n}
// then obeys commands read from stdin, one per line, printing one JSON line for each:
//   mix R            every client runs R cycles of  set k; wait [k] + get k; add c 1; wait [k]
//                    (5 requests per cycle, 4 timed operations: set, get, add, wait)
//                    -> {"event": "mix", "requests", "ops", "failed", "t_begin", "t_end",
//                        "latencies_us": [...]}
//   barrier KEY N    every client does ADD KEY 1; the one that sees N sets KEY/go; all WAIT
//                    on KEY/go -> {"event": "barrier", "t_end", "failed", "requests"}
//   numkeys R        every client sends R GETNUMKEYS (1-byte request, 8-byte reply): the
//                    cheapest request there is -> {"event": "numkeys", "requests", "failed",
//                    "t_begin", "t_end"}
//   exit
// Times are seconds of CLOCK_MONOTONIC (std::chrono::steady_clock), comparable between
// processes of one machine.  Everything runs until done; the caller bounds it in time.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "rendezvous/client.h"

// GCC 12 reports a false -Wmismatched-new-delete where Asio's awaitable frames (allocated
// and freed by the same class-specific operators) are inlined into these coroutines.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {

namespace asio = boost::asio;
using gculaunch::rendezvous::Client;
using gculaunch::rendezvous::ClientOptions;
using gculaunch::rendezvous::Dialect;
using Clock = std::chrono::steady_clock;

double Now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

std::vector<std::string> One(std::string s) {
  std::vector<std::string> v;
  v.push_back(std::move(s));
  return v;
}

// Counts finished tasks and wakes the waiting coroutine when all are done.
class Latch {
 public:
  Latch(asio::any_io_executor ex, std::size_t count) : timer_(ex), left_(count) {
    timer_.expires_at(Clock::time_point::max());
  }
  void Done() {
    if (--left_ == 0) timer_.cancel();
  }
  asio::awaitable<void> Wait() {
    if (left_ == 0) co_return;
    boost::system::error_code ignored;
    co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  }

 private:
  asio::steady_timer timer_;
  std::size_t left_;
};

struct Load {
  ClientOptions options;
  std::vector<std::unique_ptr<Client>> clients;
  int pid = static_cast<int>(::getpid());
};

asio::awaitable<void> ConnectOne(Load& load, std::size_t i, Latch& latch, int& failed) {
  ClientOptions o = load.options;
  o.jitter_seed = i + 1;
  auto c = co_await Client::Connect(o);
  if (c.ok()) {
    load.clients[i] = std::make_unique<Client>(std::move(*c));
  } else {
    if (failed++ == 0) std::fprintf(stderr, "store_load: %s\n", c.error().Format().c_str());
  }
  latch.Done();
}

// Prints the first failure of a phase to stderr, so that a run that fails says why.
void NoteFailure(int& failed, const std::string& what) {
  if (failed++ == 0) std::fprintf(stderr, "store_load: %s\n", what.c_str());
}

asio::awaitable<void> MixOne(Client& c, std::string tag, int rounds,
                             std::vector<std::uint32_t>& lat, Latch& latch, int& failed) {
  const std::string key = "/bench/" + tag;
  const std::string counter = "/bench/n/" + tag;
  auto timed = [&lat](Clock::time_point t0) {
    lat.push_back(static_cast<std::uint32_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count()));
  };
  std::string error;
  auto check = [&error](const auto& result) {
    if (!result.ok() && error.empty()) error = result.error().Format();
    return result.ok();
  };
  for (int r = 0; r < rounds && error.empty(); ++r) {
    auto t0 = Clock::now();
    check(co_await c.Set(key, "value-" + std::to_string(r)));
    timed(t0);
    t0 = Clock::now();
    if (check(co_await c.Wait(One(key)))) check(co_await c.Get(key));
    timed(t0);
    t0 = Clock::now();
    if (error.empty()) check(co_await c.Add(counter, 1));
    timed(t0);
    t0 = Clock::now();
    if (error.empty()) check(co_await c.Wait(One(key)));
    timed(t0);
  }
  if (!error.empty()) NoteFailure(failed, "mix: " + error);
  latch.Done();
}

asio::awaitable<void> NumKeysOne(Client& c, int rounds, Latch& latch, int& failed) {
  for (int r = 0; r < rounds; ++r) {
    auto n = co_await c.NumKeys();
    if (!n.ok()) {
      NoteFailure(failed, "numkeys: " + n.error().Format());
      break;
    }
  }
  latch.Done();
}

asio::awaitable<void> BarrierOne(Client& c, std::string key, std::int64_t total, double& t_end,
                                 Latch& latch, int& failed) {
  std::string error;
  auto n = co_await c.Add(key, 1);
  if (!n.ok()) error = n.error().Format();
  if (error.empty() && *n == total) {
    auto s = co_await c.Set(key + "/go", "1");
    if (!s.ok()) error = s.error().Format();
  }
  if (error.empty()) {
    auto w = co_await c.Wait(One(key + "/go"));
    if (!w.ok()) error = w.error().Format();
  }
  if (error.empty()) {
    t_end = std::max(t_end, Now());
  } else {
    NoteFailure(failed, "barrier: " + error);
  }
  latch.Done();
}

void Print(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

asio::awaitable<void> Main(Load& load, std::size_t count) {
  auto ex = co_await asio::this_coro::executor;
  load.clients.resize(count);
  {
    Latch latch(ex, count);
    int failed = 0;
    const double t_begin = Now();
    for (std::size_t i = 0; i < count; ++i) {
      asio::co_spawn(ex, ConnectOne(load, i, latch, failed), asio::detached);
    }
    co_await latch.Wait();
    std::ostringstream out;
    out << R"({"event": "connected", "t_begin": )" << std::fixed << t_begin << R"(, "t_end": )"
        << Now() << R"(, "failed": )" << failed << "}";
    Print(out.str());
  }
  asio::posix::stream_descriptor input(ex, ::dup(STDIN_FILENO));
  asio::streambuf buffer;
  while (true) {
    boost::system::error_code ec;
    co_await asio::async_read_until(input, buffer, '\n',
                                    asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    std::istream lines(&buffer);
    std::string line;
    std::getline(lines, line);
    std::istringstream words(line);
    std::string cmd;
    words >> cmd;
    std::vector<Client*> live;
    for (auto& c : load.clients) {
      if (c && !c->broken()) live.push_back(c.get());
    }
    if (cmd == "exit") co_return;
    if (cmd == "mix") {
      int rounds = 1;
      words >> rounds;
      std::vector<std::vector<std::uint32_t>> lat(live.size());
      Latch latch(ex, live.size());
      int failed = 0;
      const double t_begin = Now();
      for (std::size_t i = 0; i < live.size(); ++i) {
        lat[i].reserve(static_cast<std::size_t>(rounds) * 4);
        asio::co_spawn(ex,
                       MixOne(*live[i], std::to_string(load.pid) + "-" + std::to_string(i), rounds,
                              lat[i], latch, failed),
                       asio::detached);
      }
      co_await latch.Wait();
      const double t_end = Now();
      std::ostringstream out;
      out << R"({"event": "mix", "requests": )" << live.size() * 5 * rounds << R"(, "ops": )"
          << live.size() * 4 * rounds << R"(, "failed": )" << failed << R"(, "t_begin": )"
          << std::fixed << t_begin << R"(, "t_end": )" << t_end << R"(, "latencies_us": [)";
      bool first = true;
      for (const auto& v : lat) {
        for (auto us : v) {
          out << (first ? "" : ",") << us;
          first = false;
        }
      }
      out << "]}";
      Print(out.str());
    } else if (cmd == "numkeys") {
      int rounds = 1;
      words >> rounds;
      Latch latch(ex, live.size());
      int failed = 0;
      const double t_begin = Now();
      for (Client* c : live)
        asio::co_spawn(ex, NumKeysOne(*c, rounds, latch, failed), asio::detached);
      co_await latch.Wait();
      std::ostringstream out;
      out << R"({"event": "numkeys", "requests": )" << live.size() * rounds << R"(, "failed": )"
          << failed << R"(, "t_begin": )" << std::fixed << t_begin << R"(, "t_end": )" << Now()
          << "}";
      Print(out.str());
    } else if (cmd == "barrier") {
      std::string key;
      std::int64_t total = 0;
      words >> key >> total;
      Latch latch(ex, live.size());
      int failed = 0;
      double t_end = 0;
      for (Client* c : live) {
        asio::co_spawn(ex, BarrierOne(*c, key, total, t_end, latch, failed), asio::detached);
      }
      co_await latch.Wait();
      std::ostringstream out;
      out << R"({"event": "barrier", "t_end": )" << std::fixed << t_end << R"(, "failed": )"
          << failed << R"(, "requests": )" << live.size() * 2 + 1 << "}";
      Print(out.str());
    } else {
      Print(R"({"event": "error", "message": "unknown command"})");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Many TCPStore client connections for the store benchmark", "store_load"};
  std::string host = "127.0.0.1";
  int port = 0;
  std::size_t clients = 1;
  std::string dialect = "v1";
  double connect_timeout = 60;
  app.add_option("--host", host)->capture_default_str();
  app.add_option("--port", port)->required()->check(CLI::Range(1, 65535));
  app.add_option("--clients", clients)->check(CLI::Range(std::size_t{1}, std::size_t{100000}));
  app.add_option("--dialect", dialect)->check(CLI::IsMember({"v1", "v2"}))->capture_default_str();
  app.add_option("--connect-timeout", connect_timeout, "seconds")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  asio::io_context io(1);  // declared first: destroyed after the clients' sockets
  Load load;
  load.options.host = host;
  load.options.port = static_cast<std::uint16_t>(port);
  load.options.dialect = dialect == "v2" ? Dialect::kV2 : Dialect::kV1;
  load.options.connect_timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(connect_timeout * 1000));
  load.options.initial_backoff = std::chrono::milliseconds(50);
  std::exception_ptr failure;
  asio::co_spawn(io, Main(load, clients), [&](std::exception_ptr e) { failure = e; });
  io.run();
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "store_load: %s\n", e.what());
      return 1;
    }
  }
  return 0;
}
