#include "launcher/cluster/store_host.h"

#include <cerrno>

#include "launcher/frontend/rdzv_backend.h"
#include "launcher/run/agent_store.h"

namespace gculaunch {

namespace {

// Rule 1: the command line, the platform or the backend decided already.
bool DecidedAlready(const LaunchSpec& spec) {
  return !spec.node_rank_at_rendezvous() || spec.store_host.has_value() ||
         CapabilitiesOf(spec.rdzv).elected_leader;
}

LaunchSpec WithStoreHost(const LaunchSpec& spec, bool host, const std::string& why) {
  LaunchSpec decided = spec;
  decided.store_host = host;
  decided.store_host_why = why;
  decided.store_host_inferred = true;
  decided.node_rank = host ? 0 : 1;  // node 0 hosts; the coordinator numbers the others
  decided.layout = FormatLayout(decided);
  return decided;
}

}  // namespace

StoreHostFacts ThisHostFacts(bool probe_port) {
  StoreHostFacts facts;
  facts.match_host = MatchThisHost;
  if (probe_port) {
    facts.port_taken = [](const LaunchSpec& spec) {
      int bind_errno = 0;
      // A port taken for another reason than another listener fails the launch later,
      // naming the port: only "in use" makes this node a client.
      return !BindStorePort(spec, &bind_errno).ok() && bind_errno == EADDRINUSE;
    };
  }
  return facts;
}

LaunchSpec DecideStoreHost(const LaunchSpec& spec, const StoreHostFacts& facts) {
  if (DecidedAlready(spec)) return spec;
  // Rule 2: the endpoint's host hosts the store.
  const HostMatch match = facts.match_host(spec.master_addr);
  LaunchSpec decided = WithStoreHost(spec, match.local, match.why);
  if (!match.local || !HostsAgentStore(decided) || !facts.port_taken ||
      !facts.port_taken(decided)) {
    return decided;
  }
  // Rule 3: another listener holds the port here; this node becomes its client.  Who owns
  // that listener is checked on the connections themselves (the server end of each one the
  // agent makes, RemoteLinkOptions::check_listener_owner), not by a look at the port now:
  // between a look and the connect another process could take the port.
  LaunchSpec client = WithStoreHost(decided, false,
                                    "port " + std::to_string(spec.agent_port) +
                                        " on this host is in use: joining the store there as a "
                                        "client, as torchrun does");
  client.store_listener_here = true;
  return client;
}

}  // namespace gculaunch
