#include "rendezvous/store_command.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>

#include "rendezvous/listener.h"
#include "rendezvous/proxy.h"
#include "rendezvous/server.h"

namespace gculaunch::rendezvous {
namespace {

constexpr int kExitStopped = 0;
constexpr int kExitCannotListen = 1;
constexpr int kExitUsage = 2;
constexpr int kExitUpstreamLost = 3;
constexpr int kExitInternal = 70;

std::string OneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

// "64M" -> 67108864.  Suffixes K, M, G (powers of 1024), optionally followed by "B"/"iB".
Result<std::size_t> ParseSize(const std::string& flag, const std::string& text) {
  const Error bad{flag + " '" + text + "': not a size",
                  "give a number of bytes, optionally with K, M or G, e.g. " + flag + " 64M"};
  std::size_t i = 0;
  std::uint64_t value = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (value > (UINT64_MAX - 9) / 10) return bad;
    value = value * 10 + static_cast<std::uint64_t>(text[i] - '0');
  }
  if (i == 0) return bad;
  std::string suffix = text.substr(i);
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::uint64_t scale = 1;
  if (suffix.empty() || suffix == "B") {
    scale = 1;
  } else if (suffix == "K" || suffix == "KB" || suffix == "KIB") {
    scale = 1ull << 10;
  } else if (suffix == "M" || suffix == "MB" || suffix == "MIB") {
    scale = 1ull << 20;
  } else if (suffix == "G" || suffix == "GB" || suffix == "GIB") {
    scale = 1ull << 30;
  } else {
    return bad;
  }
  if (value > UINT64_MAX / scale) return bad;
  value *= scale;
  if (value == 0) {
    return Error{flag + " '" + text + "': must be at least 1 byte",
                 "give a positive size, e.g. " + flag + " 1M"};
  }
  return static_cast<std::size_t>(value);
}

std::string SizeText(std::size_t bytes) {
  if (bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + "M";
  if (bytes % (1u << 10) == 0) return std::to_string(bytes >> 10) + "K";
  return std::to_string(bytes);
}

// "host:port" or "[v6]:port" -> options.upstream_host/upstream_port.
Status ParseUpstream(const std::string& text, StoreCommandOptions& options) {
  const Error bad{"--upstream '" + text + "': not HOST:PORT with a port from 1 to 65535",
                  "name node 0's store, e.g. --upstream 10.0.0.1:29500 or --upstream [::1]:29500"};
  std::string host;
  std::string port;
  if (text.starts_with("[")) {
    const auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return bad;
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos || text.find(':') != colon) return bad;
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty() || port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos) {
    return bad;
  }
  const int number = std::stoi(port);
  if (number < 1 || number > 65535) return bad;
  options.upstream_host = host;
  options.upstream_port = static_cast<std::uint16_t>(number);
  return OkStatus();
}

std::string HostForDisplay(const std::string& host, const ListenSocket& listener) {
  std::string shown = host.empty() || host == "*" ? listener.address() : host;
  if (shown.find(':') != std::string::npos) return "[" + shown + "]";
  return shown;
}

}  // namespace

OpenFileLimit RaiseOpenFileLimit() {
  OpenFileLimit result;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    result.error = std::strerror(errno);
    return result;
  }
  result.before = result.now = limit.rlim_cur;
  if (limit.rlim_cur >= limit.rlim_max) return result;
  limit.rlim_cur = limit.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    result.error = std::strerror(errno);
    return result;
  }
  result.now = limit.rlim_max;
  return result;
}

Result<StoreCommand> ParseStoreArgs(const std::vector<std::string>& args) {
  StoreCommandOptions options;
  int port = options.port;
  std::string max_key = SizeText(options.limits.max_key_size);
  std::string max_value = SizeText(options.limits.max_value_size);
  std::string max_request = SizeText(options.limits.max_request_size);
  std::string max_queued = SizeText(options.limits.max_queued);
  std::string max_buffered = SizeText(options.limits.max_buffered);

  CLI::App app{
      "Runs the TCPStore-compatible rendezvous store in the foreground. Real "
      "torch.distributed.TCPStore clients (torch 1.x and 2.x) can use it, e.g. as the "
      "env:// store with TORCHELASTIC_USE_AGENT_STORE=True.",
      "gculaunch store"};
  app.add_option("--host", options.host,
                 "address to listen on: 127.0.0.1, an address of this machine, or \"\" for all "
                 "interfaces (IPv6 and IPv4)")
      ->capture_default_str();
  app.add_option("--port", port, "TCP port to listen on; 0 picks a free one")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--max-connections", options.max_connections,
                 "more simultaneous connections are closed at once (torch 1.x opens two per "
                 "process)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 24))
      ->capture_default_str();
  app.add_option("--max-key-size", max_key, "longest key accepted (K, M, G suffixes)")
      ->capture_default_str();
  app.add_option("--max-value-size", max_value, "largest value accepted")->capture_default_str();
  app.add_option("--max-keys-per-request", options.limits.max_keys_per_request,
                 "most keys in one CHECK, WAIT, MULTI_GET or MULTI_SET")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 24))
      ->capture_default_str();
  app.add_option("--max-request-size", max_request, "most key and value bytes in one request")
      ->capture_default_str();
  app.add_option("--max-queued", max_queued,
                 "most bytes waiting to be sent to one connection (replies, WAIT wake-ups, "
                 "watch events); more closes it")
      ->capture_default_str();
  app.add_option("--max-buffered", max_buffered,
                 "most bytes all connections together may hold in requests being read and "
                 "replies not yet sent; past it the connections holding the most are closed")
      ->capture_default_str();
  std::string upstream;
  app.add_option("--upstream", upstream,
                 "HOST:PORT of another store: serve as a store proxy in front of it instead of "
                 "as a store (what --store-proxy runs on every node but node 0; that store must "
                 "be a gculaunch store without a job secret)");
  app.add_option("--log-level", options.log_level, "trace, debug, info, warn, error or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();
  app.footer(
      "The first line on stdout is 'listening on HOST:PORT'. SIGTERM or SIGINT stops the "
      "store. Exit codes: 0 stopped, 1 could not listen, 2 bad flags, 3 (--upstream) the "
      "upstream store could not be reached or was lost.");

  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    return StoreCommand{StoreHelp{app.help()}};
  } catch (const CLI::ParseError& e) {
    return Error{"store: " + OneLine(e.what()), "see 'gculaunch store --help'"};
  }
  options.port = static_cast<std::uint16_t>(port);
  auto key = ParseSize("--max-key-size", max_key);
  if (!key.ok()) return key.error();
  auto value = ParseSize("--max-value-size", max_value);
  if (!value.ok()) return value.error();
  auto request = ParseSize("--max-request-size", max_request);
  if (!request.ok()) return request.error();
  options.limits.max_key_size = *key;
  options.limits.max_value_size = *value;
  options.limits.max_request_size = *request;
  auto queued = ParseSize("--max-queued", max_queued);
  if (!queued.ok()) return queued.error();
  auto buffered = ParseSize("--max-buffered", max_buffered);
  if (!buffered.ok()) return buffered.error();
  options.limits.max_queued = *queued;
  options.limits.max_buffered = *buffered;
  if (!upstream.empty()) {
    Status parsed = ParseUpstream(upstream, options);
    if (!parsed.ok()) return parsed.error();
  }
  return StoreCommand{options};
}

namespace {

// `gculaunch store --upstream`: the store proxy alone, until a signal or a lost upstream.
int RunProxy(boost::asio::io_context& io, const StoreCommandOptions& options, ListenSocket listener,
             spdlog::logger& log) {
  const std::string shown_host = HostForDisplay(options.host, listener);
  int code = kExitStopped;
  ProxyOptions proxy_options;
  proxy_options.upstream_host = options.upstream_host;
  proxy_options.upstream_port = options.upstream_port;
  proxy_options.limits = options.limits;
  proxy_options.max_connections = options.max_connections;
  proxy_options.on_lost = [&](const std::string& why) {
    std::fprintf(stderr,
                 "gculaunch store: %s (fix: start the upstream store first, and check "
                 "that it is a gculaunch store)\n",
                 why.c_str());
    code = kExitUpstreamLost;
    io.stop();
  };
  Proxy proxy(io, std::move(listener), proxy_options, log);
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    log.info("received {}, stopping", signo == SIGINT ? "SIGINT" : "SIGTERM");
    proxy.Stop();
    io.stop();
  });
  std::printf("listening on %s:%u\n", shown_host.c_str(), static_cast<unsigned>(proxy.port()));
  std::fflush(stdout);
  io.run();
  return code;
}

}  // namespace

int StoreMain(const std::vector<std::string>& args) {
  try {
    auto parsed = ParseStoreArgs(args);
    if (!parsed.ok()) {
      std::fprintf(stderr, "%s\n", parsed.error().Format().c_str());
      return kExitUsage;
    }
    if (const auto* help = std::get_if<StoreHelp>(&*parsed)) {
      std::fputs(help->text.c_str(), stdout);
      std::fflush(stdout);
      return kExitStopped;
    }
    const auto& options = std::get<StoreCommandOptions>(*parsed);

    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    spdlog::logger log("store", sink);
    log.set_pattern("%Y-%m-%d %H:%M:%S.%e gculaunch store %l: %v");
    log.set_level(spdlog::level::from_str(options.log_level));
    log.flush_on(spdlog::level::trace);

    // Every client connection is a file descriptor; the default soft limit is often 1024.
    const OpenFileLimit files = RaiseOpenFileLimit();
    if (!files.error.empty()) {
      log.warn("could not raise the open-file limit from {}: {}", files.before, files.error);
    } else if (files.now != files.before) {
      log.info("open-file limit raised from {} to {}", files.before, files.now);
    }
    auto listener = ListenSocket::Bind(options.host, options.port);
    if (!listener.ok()) {
      std::fprintf(stderr, "%s\n", listener.error().Format().c_str());
      return kExitCannotListen;
    }
    const std::string shown_host = HostForDisplay(options.host, *listener);

    boost::asio::io_context io(1);  // one thread runs it: lets Asio skip cross-thread wakeups
    if (!options.upstream_host.empty()) return RunProxy(io, options, std::move(*listener), log);
    ServerOptions server_options;
    server_options.limits = options.limits;
    server_options.max_connections = options.max_connections;
    server_options.connection_cap_hint = "raise --max-connections";
    Server server(io, std::move(*listener), server_options, log);

    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code& ec, int signo) {
      if (ec) return;
      log.info("received {}, stopping", signo == SIGINT ? "SIGINT" : "SIGTERM");
      server.Stop();
    });

    std::printf("listening on %s:%u\n", shown_host.c_str(), static_cast<unsigned>(server.port()));
    std::fflush(stdout);
    io.run();
    return kExitStopped;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gculaunch: internal error in the store: %s (fix: please report it)\n",
                 e.what());
    return kExitInternal;
  }
}

}  // namespace gculaunch::rendezvous
