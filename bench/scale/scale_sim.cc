// scale_sim: the simulated part of the scale harness (bench/scale.py).
//
//   scale_sim nodes --first K --count M --dialect v1|v2 --work-dir DIR -- GCULAUNCH-FLAGS...
//       M simulated nodes K..K+M-1 in this process, on one io_context (sim_node.h): each is
//       what `gculaunch --node-rank <k> --master-addr <a> GCULAUNCH-FLAGS...` would make of
//       its command line (the real front end, agent, board and link), with simulated ranks.
//       Node k meets node 0 at 127.0.<k/4096>.1 (node 0 listens on every address), so that
//       no destination is reached by more agent connections than one source address has
//       ports.  With --store-proxy among the flags, every node gets the real store proxy
//       (rendezvous/proxy.h) on its own source address, and its ranks connect there.
//       Prints {"event": "prepared", ...} once every node is built, then obeys one command
//       per line on stdin:
//         go          every node joins the job
//         fail K      node K's local rank 0 exits 1
//         kill K      node K's gculaunch is SIGKILLed (ranks and connections gone)
//         rejoin K    a new gculaunch starts on node K (after kill)
//         stats       {"event": "stats", "rss_kb", "hwm_kb", "cpu_s"} of this process
//         exit        ends the process
//       and prints, per epoch e, once all of its nodes (ranks) got there:
//         {"event": "started", "epoch": e, "t": T}   every node started its ranks
//         {"event": "barrier", "epoch": e, "t": T}   every rank passed the barrier
//         {"event": "uid", "epoch": e, "t": T}       every rank has the unique id
//       and {"event": "failed", "node": k, "what": ...} for a rank's or node's failure (the
//       first 20; "failures" counts all), {"event": "exited", "nodes": n, "codes": {...}}
//       once every node ended.
//   scale_sim rank --dialect v1|v2 [--hold S]
//       One simulated rank as a process (node 0's ranks under the real gculaunch): the same
//       traffic, from RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and
//       TORCHELASTIC_RESTART_COUNT; prints {"event": "rank", "rank", "epoch", "barrier",
//       "uid"} once it has the unique id, then holds its connections until SIGTERM or S
//       seconds (default 900) pass.  A failure is one line on stderr and exit code 1.
// Times are seconds of CLOCK_MONOTONIC, comparable between the processes of one machine.
#include <spdlog/sinks/basic_file_sink.h>
#include <sys/resource.h>
#include <unistd.h>

extern char** environ;

#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/streambuf.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "base/env_map.h"
#include "bench/scale/sim_node.h"
#include "launcher/frontend/cli.h"
#include "launcher/frontend/rank_env.h"
#include "launcher/sys/device_probe.h"
#include "launcher/sys/local_files.h"
#include "rendezvous/proxy.h"

namespace gculaunch::bench {
namespace {

namespace asio = boost::asio;

// Failure lines printed one by one; the rest are counted.
constexpr int kMaxFailureLines = 20;

std::string Quote(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "\"";
}

void Emit(const std::string& json) {
  std::fputs((json + "\n").c_str(), stdout);
  std::fflush(stdout);
}

long StatusKb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(field + ":")) return std::atol(line.c_str() + field.size() + 1);
  }
  return -1;
}

double CpuSeconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

rendezvous::Dialect ParseDialect(const std::string& text) {
  return text == "v2" ? rendezvous::Dialect::kV2 : rendezvous::Dialect::kV1;
}

// The address node k's agent meets node 0 at (see the file comment).
std::string MeetingAddress(int node) { return "127.0." + std::to_string(node >> 12) + ".1"; }

// The job's nodes in this process, and what they report, aggregated per epoch.
class SimJob : public SimJobHooks {
 public:
  SimJob(asio::io_context& io, int ranks_per_node) : io_(io), ranks_per_node_(ranks_per_node) {}

  std::vector<std::unique_ptr<SimNode>> nodes;

  void NodeStarted(int, int epoch, double t, const std::vector<int>& ranks,
                   int world_size) override {
    Planned& planned = planned_[epoch];
    planned.ranks.insert(planned.ranks.end(), ranks.begin(), ranks.end());
    planned.world_sizes.insert(world_size);
    Count(started_, epoch, t, Nodes(), "started", Describe(planned));
  }
  void RankPassed(int, int epoch, double t) override {
    Count(passed_, epoch, t, Nodes() * ranks_per_node_, "barrier");
  }
  void RankHasUid(int, int epoch, double t) override {
    Count(uid_, epoch, t, Nodes() * ranks_per_node_, "uid");
  }
  void RankFailed(int node, const std::string& what) override {
    if (++failures_ <= kMaxFailureLines) {
      Emit("{\"event\": \"failed\", \"node\": " + std::to_string(node) +
           ", \"what\": " + Quote(what) + ", \"failures\": " + std::to_string(failures_) + "}");
    }
  }
  void NodeExited(int, int code) override {
    ++codes_[code];
    if (++exited_ < Nodes()) return;
    std::string codes;
    for (const auto& [c, n] : codes_) {
      codes += (codes.empty() ? "" : ", ") + Quote(std::to_string(c)) + ": " + std::to_string(n);
    }
    Emit("{\"event\": \"exited\", \"nodes\": " + std::to_string(exited_) + ", \"codes\": {" +
         codes + "}, \"failures\": " + std::to_string(failures_) + "}");
  }

  SimNode* Find(int node) {
    for (auto& n : nodes) {
      if (n->node() == node) return n.get();
    }
    return nullptr;
  }

  void Command(const std::string& line) {
    std::istringstream in(line);
    std::string verb;
    int node = -1;
    in >> verb >> node;
    SimNode* target = Find(node);
    if (verb == "go") {
      for (auto& n : nodes) n->Start();
    } else if (verb == "stats") {
      Emit("{\"event\": \"stats\", \"rss_kb\": " + std::to_string(StatusKb("VmRSS")) +
           ", \"hwm_kb\": " + std::to_string(StatusKb("VmHWM")) +
           ", \"cpu_s\": " + std::to_string(CpuSeconds()) + "}");
    } else if (verb == "exit") {
      for (auto& n : nodes) n->Kill();
      io_.stop();
    } else if (target == nullptr) {
      Emit("{\"event\": \"error\", \"what\": " + Quote("no node in this process: " + line) + "}");
    } else if (verb == "fail") {
      target->FailRank();
    } else if (verb == "kill") {
      target->Kill();
    } else if (verb == "rejoin" && !target->alive()) {
      target->Start();
    } else {
      Emit("{\"event\": \"error\", \"what\": " + Quote("unknown command: " + line) + "}");
    }
  }

 private:
  struct Tally {
    int count = 0;
    double last = 0;
  };
  int Nodes() const { return static_cast<int>(nodes.size()); }

  // The global ranks the nodes of one epoch were given, for the harness to check that the
  // job's nodes together hold every rank of the world once.
  struct Planned {
    std::vector<int> ranks;
    std::set<int> world_sizes;
  };

  // `, "ranks": [[lo, hi], ...], "duplicates": n, "world_sizes": [...]` of `planned`: the
  // ranks as sorted intervals (a node's ranks are consecutive: a few intervals, not 16k).
  static std::string Describe(Planned& planned) {
    std::vector<int>& r = planned.ranks;
    std::sort(r.begin(), r.end());
    std::string intervals;
    int duplicates = 0;
    for (std::size_t i = 0; i < r.size();) {
      std::size_t j = i;
      while (j + 1 < r.size() && r[j + 1] <= r[j] + 1) {
        if (r[j + 1] == r[j]) ++duplicates;
        ++j;
      }
      intervals += (intervals.empty() ? "[" : ", [") + std::to_string(r[i]) + ", " +
                   std::to_string(r[j]) + "]";
      i = j + 1;
    }
    std::string worlds;
    for (const int w : planned.world_sizes)
      worlds += (worlds.empty() ? "" : ", ") + std::to_string(w);
    return ", \"ranks\": [" + intervals + "], \"duplicates\": " + std::to_string(duplicates) +
           ", \"world_sizes\": [" + worlds + "]";
  }

  static void Count(std::map<int, Tally>& tallies, int epoch, double t, int target,
                    const char* name, const std::string& extra = "") {
    Tally& tally = tallies[epoch];
    tally.last = std::max(tally.last, t);
    if (++tally.count != target) return;
    char text[160];
    std::snprintf(text, sizeof text, "{\"event\": \"%s\", \"epoch\": %d, \"t\": %.6f", name, epoch,
                  tally.last);
    Emit(text + extra + "}");
  }

  asio::io_context& io_;
  int ranks_per_node_;
  std::map<int, Tally> started_, passed_, uid_;
  std::map<int, Planned> planned_;
  std::map<int, int> codes_;
  int exited_ = 0;
  int failures_ = 0;
};

void ReadCommands(asio::posix::stream_descriptor& in, asio::streambuf& buffer, SimJob& job) {
  asio::async_read_until(
      in, buffer, '\n', [&in, &buffer, &job](const boost::system::error_code& ec, std::size_t n) {
        if (ec) {
          job.Command("exit");  // the harness went away
          return;
        }
        std::string line(asio::buffers_begin(buffer.data()),
                         asio::buffers_begin(buffer.data()) + static_cast<std::ptrdiff_t>(n) - 1);
        buffer.consume(n);
        job.Command(line);
        ReadCommands(in, buffer, job);
      });
}

// The LaunchSpec `gculaunch --node-rank <node> --master-addr <a> FLAGS...` would run with.
Result<LaunchSpec> NodeSpec(int node, const std::vector<std::string>& flags, const EnvMap& env) {
  std::vector<std::string> args = {"--node-rank", std::to_string(node), "--master-addr",
                                   MeetingAddress(node)};
  args.insert(args.end(), flags.begin(), flags.end());
  auto parsed = ParseCli(args, env);
  if (!parsed.ok()) return parsed.error();
  FileSystemDeviceProbe probe(parsed->options.sysroot.value_or("/"));
  LocalFileAccess files;
  return MakeLaunchSpec(parsed->options, env, probe, files);
}

// --store-proxy: one proxy per simulated node on the node's own source address, carrying its
// ranks to node 0's store; the returned route sends each node's ranks to its proxy.
Result<RankRoute> StartProxies(asio::io_context& io, const std::vector<LaunchSpec>& specs,
                               const RankRoute& direct, spdlog::logger& log,
                               std::vector<std::unique_ptr<rendezvous::Proxy>>& proxies) {
  auto ports = std::make_shared<std::map<int, std::uint16_t>>();
  auto by_node = std::make_shared<std::map<int, rendezvous::Proxy*>>();
  for (const LaunchSpec& spec : specs) {
    const std::string address = direct.source(spec.node_rank);
    auto listener = rendezvous::ListenSocket::Bind(address, 0);
    // Node 0 binds its store port on every address after this: a proxy must not hold it.
    if (listener.ok() && listener->port() == spec.master_port) {
      listener = rendezvous::ListenSocket::Bind(address, 0);  // bound before the first closes
    }
    if (!listener.ok()) return listener.error();
    (*ports)[spec.node_rank] = listener->port();
    rendezvous::ProxyOptions options;
    options.upstream_host = spec.master_addr;
    options.upstream_port = static_cast<std::uint16_t>(spec.master_port);
    options.connect_timeout = std::chrono::milliseconds(
        static_cast<std::int64_t>(std::max(spec.rdzv_timeout_s, 1.0) * 1000));
    proxies.push_back(
        std::make_unique<rendezvous::Proxy>(io, std::move(*listener), std::move(options), log));
    (*by_node)[spec.node_rank] = proxies.back().get();
  }
  RankRoute route = direct;
  route.target = [ports, source = direct.source](int node, const std::string&, std::uint16_t) {
    return std::make_pair(source(node), ports->at(node));
  };
  // The node's gculaunch reaches node 0 through its proxy too, as a real one does.
  route.proxy = [by_node](int node) { return by_node->at(node); };
  return route;
}

int RunNodes(int first, int count, const std::string& dialect, const std::string& work_dir,
             const std::vector<std::string>& flags) {
  asio::io_context io;
  auto sink = std::make_shared<spdlog::sinks::basic_file_sink_st>(
      work_dir + "/nodes-" + std::to_string(first) + ".log", true);
  spdlog::logger log("scale_sim", sink);
  log.set_pattern("[%H:%M:%S.%e] %l: %v");
  log.flush_on(spdlog::level::warn);
  RankRoute route = DirectRoute();
  const EnvMap env;  // the nodes' environment: nothing a platform would read
  const double t_begin = MonotonicNow();
  std::vector<LaunchSpec> specs;
  for (int k = first; k < first + count; ++k) {
    auto spec = NodeSpec(k, flags, env);
    if (!spec.ok()) {
      std::fprintf(stderr, "scale_sim: node %d: %s\n", k, spec.error().Format().c_str());
      return 2;
    }
    specs.push_back(std::move(*spec));
  }
  // Declared before the job: the nodes' agents use their proxies until they are destroyed.
  std::vector<std::unique_ptr<rendezvous::Proxy>> proxies;
  SimJob job(io, specs.empty() ? 1 : specs.front().nproc_per_node);
  if (!specs.empty() && ProxiesStore(specs.front())) {
    auto routed = StartProxies(io, specs, route, log, proxies);
    if (!routed.ok()) {
      std::fprintf(stderr, "scale_sim: %s\n", routed.error().Format().c_str());
      return 2;
    }
    route = std::move(*routed);
  }
  for (LaunchSpec& spec : specs) {
    const std::string scratch = work_dir + "/node" + std::to_string(spec.node_rank);
    job.nodes.push_back(std::make_unique<SimNode>(io, std::move(spec), scratch, route,
                                                  ParseDialect(dialect), job, log));
  }
  specs.clear();
  char text[160];
  std::snprintf(text, sizeof text,
                "{\"event\": \"prepared\", \"nodes\": %d, \"seconds\": %.3f, \"rss_kb\": %ld}",
                count, MonotonicNow() - t_begin, StatusKb("VmRSS"));
  Emit(text);
  asio::posix::stream_descriptor in(io, ::dup(STDIN_FILENO));
  asio::streambuf buffer;
  ReadCommands(in, buffer, job);
  asio::signal_set stop(io, SIGTERM, SIGINT);
  stop.async_wait([&job](const boost::system::error_code& ec, int) {
    if (!ec) job.Command("exit");
  });
  io.run();
  return 0;
}

// One rank as a process (see the file comment).
int RunRank(const std::string& dialect, int hold_s) {
  const EnvMap env = EnvMap::FromEnviron(environ);
  RankSetup s;
  s.rank = std::atoi(env.GetOr("RANK", "0").c_str());
  s.world_size = std::atoi(env.GetOr("WORLD_SIZE", "1").c_str());
  s.restart_count = std::atoi(env.GetOr("TORCHELASTIC_RESTART_COUNT", "0").c_str());
  s.store_host = env.GetOr("MASTER_ADDR", "127.0.0.1");
  s.store_port = static_cast<std::uint16_t>(std::atoi(env.GetOr("MASTER_PORT", "0").c_str()));
  s.dialect = ParseDialect(dialect);
  asio::io_context io;
  double barrier = 0;
  int code = 0;
  asio::steady_timer hold(io);
  asio::signal_set stop(io, SIGTERM, SIGINT);
  RankEvents events;
  events.barrier = [&barrier](double t) { barrier = t; };
  events.uid = [&, epoch = s.restart_count, rank = s.rank](double t) {
    char text[200];
    std::snprintf(text, sizeof text,
                  "{\"event\": \"rank\", \"rank\": %d, \"epoch\": %d, \"barrier\": %.6f, "
                  "\"uid\": %.6f}",
                  rank, epoch, barrier, t);
    Emit(text);
  };
  events.failed = [&](const std::string& what) {
    std::fprintf(stderr, "scale_sim: %s\n", what.c_str());
    code = 1;
    io.stop();
  };
  auto rank = std::make_shared<SimRank>(io, s, events);
  rank->Start();
  hold.expires_after(std::chrono::seconds(hold_s));
  hold.async_wait([&io](const boost::system::error_code& ec) {
    if (!ec) io.stop();
  });
  stop.async_wait([&io](const boost::system::error_code& ec, int) {
    if (!ec) io.stop();
  });
  io.run();
  rank->Stop();
  return code;
}

}  // namespace
}  // namespace gculaunch::bench

int main(int argc, char** argv) {
  CLI::App app{"scale_sim: simulated nodes and ranks for bench/scale.py"};
  app.require_subcommand(1);
  std::string dialect = "v1";
  int first = 1;
  int count = 1;
  int hold_s = 900;
  std::string work_dir = ".";
  std::vector<std::string> flags;
  auto* nodes = app.add_subcommand("nodes", "simulated nodes (agents and ranks) in one process");
  nodes->add_option("--first", first, "the first node rank")->required();
  nodes->add_option("--count", count, "how many nodes")->required()->check(CLI::PositiveNumber);
  nodes->add_option("--dialect", dialect, "v1 (torch 1.13) or v2 (torch 2.x)")
      ->check(CLI::IsMember({"v1", "v2"}));
  nodes->add_option("--work-dir", work_dir, "log and scratch files")->required();
  nodes->add_option("flags", flags, "gculaunch's flags after --");
  auto* rank = app.add_subcommand("rank", "one simulated rank (node 0's, under gculaunch)");
  rank->add_option("--dialect", dialect, "v1 (torch 1.13) or v2 (torch 2.x)")
      ->check(CLI::IsMember({"v1", "v2"}));
  rank->add_option("--hold", hold_s, "seconds to hold the connections at most");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (*nodes) return gculaunch::bench::RunNodes(first, count, dialect, work_dir, flags);
  return gculaunch::bench::RunRank(dialect, hold_s);
}
