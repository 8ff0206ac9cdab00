// gculaunch_etcd_probe: the etcd client alone in a fully static program, for the old-root TLS
// check (tests/checks/etcd_tls_oldroot.sh): the gculaunch binary itself holds no etcd client
// until the job boards use it.
//
//   gculaunch_etcd_probe ENDPOINTS [CA_FILE]
//
// Puts /probe = "1", opens a watch on it from that revision and waits for the event; prints
// "probe: ok" and exits 0, or prints the client's one-line error and exits 1.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdio>
#include <string>

#include "etcd/client.h"

// GCC 12 reports a false -Wmismatched-new-delete where Asio's awaitable frames are inlined.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {

namespace asio = boost::asio;
using gculaunch::etcd::Client;
using gculaunch::etcd::ClientOptions;
using gculaunch::etcd::WatchOptions;

// The probe's steps; "" when they all worked, else the first error.
asio::awaitable<std::string> Probe(asio::any_io_executor executor, ClientOptions options) {
  Client client(executor, std::move(options));
  auto put = co_await client.Put("/probe", "1");
  if (!put.ok()) co_return put.error().Format();
  WatchOptions watch_options;
  watch_options.key = "/probe";
  watch_options.start_revision = put->revision;
  auto watch = co_await client.OpenWatch(watch_options);
  if (!watch.ok()) co_return watch.error().Format();
  auto batch = co_await (*watch)->Next();
  if (!batch.ok()) co_return batch.error().Format();
  if (batch->events.empty() || batch->events[0].kv.value != "1") co_return "probe: wrong event";
  (*watch)->Cancel();
  co_return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: gculaunch_etcd_probe ENDPOINTS [CA_FILE]\n");
    return 2;
  }
  auto endpoints = gculaunch::etcd::ParseEndpoints(argv[1]);
  if (!endpoints.ok()) {
    std::printf("%s\n", endpoints.error().Format().c_str());
    return 1;
  }
  ClientOptions options;
  options.endpoints = *endpoints;
  if (argc == 3) options.tls.ca_file = argv[2];
  asio::io_context io;
  std::string result = "probe: no result within 20 s";
  asio::co_spawn(io, Probe(io.get_executor(), std::move(options)),
                 [&](const std::exception_ptr& error, std::string outcome) {
                   result = error ? "probe: exception" : std::move(outcome);
                 });
  io.run_for(std::chrono::seconds(20));
  std::printf("%s\n", result.empty() ? "probe: ok" : result.c_str());
  return result.empty() ? 0 : 1;
}
