// RdzvBackend: the rendezvous backend of a launch, a closed type chosen once, by MakeLaunchSpec
// from --rdzv-backend, and RdzvCapabilities, the one table of what each backend can do.
//
// Each backend is one alternative of the variant and carries its own settings:
//   StoreRendezvous  gculaunch's built-in store (torchrun's static and c10d): the node
//                    MASTER_ADDR names hosts the store, the agents and the coordinator
//   EtcdSettings     etcd (etcd, etcd-v2; etcd_settings.h): each term's elected leader hosts
//                    the ranks' store and coordinates
//
// The front end refuses what a backend cannot do by its row of the table, and the cluster
// layer shapes the job by the same row and makes the backend's ClusterNode from its settings
// (launcher/cluster/rdzv_backends.h).  A new backend is one alternative here, one row, and
// one folder under launcher/cluster/ (docs/architecture.md, "Where to add"): a missing row or
// a missing maker fails to compile.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <string_view>
#include <variant>

#include "launcher/frontend/etcd_settings.h"

namespace gculaunch {

/// gculaunch's built-in store: --rdzv-backend static or c10d, or none given.
struct StoreRendezvous {
  bool operator==(const StoreRendezvous&) const = default;
};

/// The rendezvous backend and its settings.  The order of the alternatives is the order of
/// the rows of the capability table (rdzv_backend.cc).
using RdzvBackend = std::variant<StoreRendezvous, EtcdSettings>;

/// What a backend can do.  A false field is a feature the front end refuses or leaves out with
/// a note, and a shape of the job the cluster layer picks by it.
struct RdzvCapabilities {
  /// As --rdzv-backend names it in messages ("c10d", "etcd").
  std::string_view name;
  /// The node that hosts the ranks' store and coordinates is elected for each term (any node
  /// may be it), not the one MASTER_ADDR names: node ranks are assigned at rendezvous, and
  /// even a job of one node meets the others (none) through the backend.
  bool elected_leader = false;
  /// How messages name that elected node ("the job's leader in etcd"); empty without one.
  std::string_view leader_name;
  /// --hang-timeout across nodes: the job-wide hang watch beside the coordinator.
  bool hang_watch = false;
  /// --job-secret-file guards the job's keys and the agents' connections.
  bool job_secret = false;
  /// Without it: what protects the job's keys instead, for the note that ignores the file.
  std::string_view keys_protected_by;
  /// --nnodes MIN:MAX.
  bool elastic = false;
};

/// The row of `backend`.
const RdzvCapabilities& CapabilitiesOf(const RdzvBackend& backend);

}  // namespace gculaunch
