// DecideStoreHost: the one place that decides whether this node hosts the job's store (binds
// its port) or is a client of the store another node, or another launcher on this host,
// serves; and why, in words for the layout line (docs/multinode.md, "Who hosts the store" under
// "Elastic jobs").
//
// The rules, in order (the first that applies decides):
//   1. decided already: node ranks given (node 0 hosts), --rdzv-conf is_host, or a backend
//      whose leader is elected per term (RdzvCapabilities::elected_leader): nothing changes;
//   2. node ranks at rendezvous on the built-in store: the node that the endpoint's host
//      names hosts the store, as torchrun's c10d rendezvous does (MatchThisHost); it becomes
//      node 0, the others node 1 until the coordinator numbers them;
//   3. that node finds the store's port taken on this host (a second launcher of the job
//      here, e.g. hostNetwork pods): it joins the store there as a client, as torchrun does.
//      The agent then checks, on each connection it makes there, that the process serving
//      it is the job's user's or root's (store_listener_here; agent_link.h), and the
//      coordinator that the listener is this job's (the run id).
// What the decision looks at on this host comes in as StoreHostFacts, so that the rules are
// a pure function (tests/launcher/cluster/store_host_test.cc has their table).
//
// Thread safety: DecideStoreHost is pure; ThisHostFacts' functions look at the machine.
#pragma once

#include <functional>
#include <string>

#include "launcher/cluster/net_address.h"
#include "launcher/frontend/launch_spec.h"

namespace gculaunch {

/// What DecideStoreHost looks at on this host.
struct StoreHostFacts {
  /// Whether MASTER_ADDR (the endpoint's host) names this machine, and why.
  std::function<HostMatch(const std::string& master_addr)> match_host;
  /// Whether another process holds the store's port of `spec` on this host (binding it fails
  /// with EADDRINUSE).  Null: not asked (the dry run binds nothing).
  std::function<bool(const LaunchSpec& spec)> port_taken;
};

/// The real look at this machine: MatchThisHost, and with `probe_port` a bind of the store's
/// port that is closed again at once (the launch binds it after the guardian is forked).
StoreHostFacts ThisHostFacts(bool probe_port);

/// `spec` with the store host decided by the rules above: store_host, store_host_why,
/// store_host_inferred, store_listener_here, node_rank and the layout line.  Unchanged when rule 1
/// applies.
LaunchSpec DecideStoreHost(const LaunchSpec& spec, const StoreHostFacts& facts);

}  // namespace gculaunch
