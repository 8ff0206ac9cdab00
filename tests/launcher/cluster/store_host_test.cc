#include "launcher/cluster/store_host.h"

#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

namespace gculaunch {
namespace {

// Where the spec of a row comes from.
enum class Given {
  kNodeRank,      // --node-rank 1: node ranks given, nothing to decide
  kIsHostFalse,   // --rdzv-conf is_host=false at rendezvous
  kElected,       // --rdzv-backend etcd: each term's leader hosts the store
  kAtRendezvous,  // c10d without node ranks: the endpoint's host hosts the store
};

LaunchSpec SpecOf(Given given) {
  LaunchSpec spec;
  spec.nnodes = 2;
  spec.nproc_per_node = 1;
  spec.master_addr = "node0";
  spec.master_port = 29400;
  spec.agent_port = 29400;
  spec.layout_sources = "(from --rdzv-endpoint)";
  spec.node_rank = 1;
  if (given != Given::kNodeRank) spec.min_nodes = 2;
  if (given == Given::kIsHostFalse) {
    spec.store_host = false;
    spec.store_host_why = "--rdzv-conf is_host=false";
  }
  if (given == Given::kElected) spec.rdzv = EtcdSettings{};
  spec.layout = FormatLayout(spec);
  return spec;
}

struct Row {
  const char* what;
  Given given;
  bool endpoint_here;              // MASTER_ADDR names this machine
  std::optional<bool> port_taken;  // nullopt: not asked (the dry run)
  // expected:
  bool changed;
  bool hosts;
  int node_rank;
  const char* why;
  bool port_asked;
};

const char* const kHere = "node0 is this host's name";
const char* const kElsewhere = "node0 resolves to no address of this machine";
const char* const kTaken =
    "port 29400 on this host is in use: joining the store there as a client, as torchrun does";

const std::vector<Row> kRows = {
    {"node ranks given decide", Given::kNodeRank, true, true, false, false, 1, "", false},
    {"is_host decides", Given::kIsHostFalse, true, true, false, false, 1,
     "--rdzv-conf is_host=false", false},
    {"an elected leader decides", Given::kElected, true, true, false, false, 1, "", false},
    {"the endpoint's host hosts", Given::kAtRendezvous, true, false, true, true, 0, kHere, true},
    {"another host is a client", Given::kAtRendezvous, false, true, true, false, 1, kElsewhere,
     false},
    {"a taken port makes the endpoint's host a client", Given::kAtRendezvous, true, true, true,
     false, 1, kTaken, true},
    {"the dry run asks for no port", Given::kAtRendezvous, true, std::nullopt, true, true, 0, kHere,
     false},
};

TEST_CASE("DecideStoreHost: who hosts the store, and why, row by row", "[store_host]") {
  for (const Row& row : kRows) {
    INFO(row.what);
    const LaunchSpec spec = SpecOf(row.given);
    bool port_asked = false;
    StoreHostFacts facts;
    facts.match_host = [&](const std::string& addr) {
      CHECK(addr == "node0");
      return HostMatch{row.endpoint_here, row.endpoint_here ? kHere : kElsewhere};
    };
    if (row.port_taken) {
      facts.port_taken = [&](const LaunchSpec& decided) {
        port_asked = true;
        CHECK(decided.node_rank == 0);  // asked only of the host, about its own port
        return *row.port_taken;
      };
    }
    const LaunchSpec decided = DecideStoreHost(spec, facts);
    CHECK(port_asked == row.port_asked);
    CHECK(decided.node_rank == row.node_rank);
    CHECK(decided.store_host_why == row.why);
    // Only a client of a listener on its own host checks that listener's owner.
    CHECK(decided.store_listener_here == (row.why == kTaken));
    if (!row.changed) {
      CHECK(decided.store_host == spec.store_host);
      CHECK_FALSE(decided.store_host_inferred);
      CHECK(decided.layout == spec.layout);
      continue;
    }
    CHECK(decided.store_host == std::optional<bool>(row.hosts));
    CHECK(decided.store_host_inferred);
    // The layout line says which, and why.
    CHECK(decided.layout == FormatLayout(decided));
    const std::string says =
        std::string(row.hosts ? "this node hosts the store" : "another node hosts the store") +
        " (" + row.why + ")";
    CHECK(decided.layout.find(says) != std::string::npos);
  }
}

}  // namespace
}  // namespace gculaunch
