#include "launcher/check/etcd_check.h"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <exception>
#include <utility>

#include "base/duration.h"
#include "base/text.h"

// GCC 12 reports a false -Wmismatched-new-delete where Asio's awaitable frames (allocated
// and freed by the same class-specific operators) are inlined into these coroutines.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace gculaunch {
namespace {

namespace asio = boost::asio;
using std::chrono::milliseconds;

// What the checks found; filled by the coroutines, read once the loop stopped.
struct Findings {
  std::vector<CheckItem> items;
  bool finished = false;

  void Add(std::string name, CheckStatus status, std::string evidence, std::string fix = "") {
    items.push_back(CheckItem{std::move(name), status, std::move(evidence), std::move(fix)});
  }
};

std::string FixOf(const Error& error, const std::string& fallback) {
  return error.hint.empty() ? fallback : error.hint;
}

// GET /version on each endpoint alone (no user: /version needs none). Returns how many
// answered. Coroutine arguments by value (GCC 12, see etcd/client.cc).
asio::awaitable<int> CheckEndpoints(asio::any_io_executor executor, etcd::ClientOptions options,
                                    Findings* findings) {
  int answered = 0;
  const std::vector<etcd::Endpoint> endpoints = options.endpoints;
  for (const etcd::Endpoint& endpoint : endpoints) {
    etcd::ClientOptions one = options;
    one.endpoints = std::vector<etcd::Endpoint>(1, endpoint);
    one.user.clear();
    one.password.clear();
    etcd::Client client(executor, std::move(one));
    auto version = co_await client.Version();
    if (version.ok()) {
      ++answered;
      findings->Add("etcd-endpoint", CheckStatus::kOk,
                    endpoint.ToString() + " answers: etcd " + version->server + ", cluster " +
                        version->cluster);
    } else {
      // The client's error says "no etcd endpoint answered /version: <endpoint>: <why>"; with
      // one endpoint, the part after the colon is the line.
      std::string what = version.error().what;
      if (const size_t at = what.find(endpoint.ToString() + ": "); at != std::string::npos) {
        what = what.substr(at);
      }
      findings->Add(
          "etcd-endpoint", CheckStatus::kFail, what,
          FixOf(version.error(), "check that etcd serves clients at " + endpoint.ToString()));
    }
  }
  co_return answered;
}

// With a user: the first request authenticates; a refusal names the user and the fix.
// Without: a plain read of the job's prefix. False when the write check cannot follow.
asio::awaitable<bool> CheckAccess(etcd::Client* client, std::string user, std::string prefix,
                                  Findings* findings) {
  auto range = co_await client->GetPrefix(prefix);
  if (range.ok()) {
    if (!user.empty()) {
      findings->Add("etcd-auth", CheckStatus::kOk,
                    "etcd accepted user '" + user + "' at " + client->current_endpoint());
    }
    co_return true;
  }
  const Error& error = range.error();
  if (!user.empty() && error.what.find("refused user") != std::string::npos) {
    findings->Add("etcd-auth", CheckStatus::kFail, error.what,
                  "give etcd user '" + user + "' its right password: --rdzv-conf user=" + user +
                      ",password=... (or password_file=PATH)");
  } else {
    findings->Add(user.empty() ? "etcd-read" : "etcd-auth", CheckStatus::kFail,
                  "cannot read " + prefix + ": " + error.what,
                  FixOf(error, "see the etcd member's log"));
  }
  co_return false;
}

Error WriteFailure(const std::string& step, const std::string& key, const Error& error,
                   const std::string& prefix) {
  return Error{step + " " + key + ": " + error.what,
               error.what.find("permission denied") != std::string::npos
                   ? "let the etcd user's role read and write the prefix: etcdctl role "
                     "grant-permission --prefix ROLE readwrite " +
                         prefix
                   : FixOf(error, "see the etcd member's log")};
}

// A probe key under a short lease: write, read back, delete, revoke the lease.
asio::awaitable<Status> WriteProbe(etcd::Client* client, std::string key, std::string prefix,
                                   std::int64_t ttl) {
  auto lease = co_await client->LeaseGrant(ttl);
  if (!lease.ok()) co_return WriteFailure("lease grant for", key, lease.error(), prefix);
  const std::string value = "gculaunch check";
  auto put = co_await client->Put(key, value, lease->id);
  if (!put.ok()) co_return WriteFailure("cannot write", key, put.error(), prefix);
  auto read = co_await client->Get(key);
  if (!read.ok()) co_return WriteFailure("cannot read back", key, read.error(), prefix);
  if (read->kvs.size() != 1 || read->kvs[0].value != value) {
    co_return Error{"read back " + key + ": the value written is not there",
                    "check that no other program deletes keys under " + prefix};
  }
  auto deleted = co_await client->Delete(key);
  if (!deleted.ok()) co_return WriteFailure("cannot delete", key, deleted.error(), prefix);
  auto revoked = co_await client->LeaseRevoke(lease->id);
  if (!revoked.ok()) co_return WriteFailure("lease revoke for", key, revoked.error(), prefix);
  co_return OkStatus();
}

asio::awaitable<void> RunChecks(asio::any_io_executor executor, etcd::ClientOptions options,
                                EtcdSettings settings, std::string probe_name, Findings* findings) {
  const std::size_t endpoints = options.endpoints.size();
  const int answered = co_await CheckEndpoints(executor, options, findings);
  if (answered == 0) {
    findings->Add("etcd", CheckStatus::kFail,
                  "none of the " + Plural(static_cast<long long>(endpoints), "etcd endpoint") +
                      " answered (" + Join(settings.endpoints, ", ") + ")",
                  "start etcd, or give its client URLs: --rdzv-endpoint HOST:2379[,HOST:2379...]");
    findings->finished = true;
    co_return;
  }
  etcd::Client client(executor, options);
  const bool access = co_await CheckAccess(&client, settings.user, settings.key_prefix, findings);
  if (access) {
    const std::string key = settings.key_prefix + "check/" + probe_name;
    Status written = co_await WriteProbe(&client, key, settings.key_prefix, settings.lease_ttl_s);
    if (written.ok()) {
      findings->Add("etcd-write", CheckStatus::kOk,
                    "wrote, read back and deleted " + key + " (lease " +
                        std::to_string(settings.lease_ttl_s) + " s)");
    } else {
      findings->Add("etcd-write", CheckStatus::kFail, written.error().what, written.error().hint);
    }
  }
  findings->finished = true;
}

}  // namespace

std::vector<CheckItem> CheckEtcd(const Result<etcd::ClientOptions>& options,
                                 const EtcdSettings& settings, const std::string& probe_name) {
  if (!options.ok()) {
    return {CheckItem{"etcd", CheckStatus::kFail, options.error().what, options.error().hint}};
  }
  // Each endpoint once for /version, then at most six requests, each of which may try every
  // endpoint: a bound on the whole check, with a second to spare.
  const auto per_request = options->connect_timeout + options->request_timeout;
  const auto bound =
      per_request * static_cast<long long>(options->endpoints.size() * 8) + std::chrono::seconds(1);
  asio::io_context io;
  Findings findings;
  std::exception_ptr failure;
  asio::co_spawn(io, RunChecks(io.get_executor(), *options, settings, probe_name, &findings),
                 [&failure](std::exception_ptr e) { failure = std::move(e); });
  io.run_for(bound);
  if (failure) std::rethrow_exception(failure);
  if (!findings.finished) {
    findings.Add(
        "etcd", CheckStatus::kFail,
        "etcd did not finish answering within " + Seconds(std::chrono::duration<double>(bound), -1),
        "check the etcd members' health: etcdctl --endpoints " + Join(settings.endpoints, ",") +
            " endpoint health");
  }
  return std::move(findings.items);
}

}  // namespace gculaunch
