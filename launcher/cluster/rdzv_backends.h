// The rendezvous backends' table, the cluster layer's half: for each alternative of RdzvBackend
// (launcher/frontend/rdzv_backend.h, whose capability rows the front end and this layer read)
// the function that makes a node of a job on it.  Each maker is declared here and defined in
// its backend's files; MakeBackendNode picks one by the spec's backend, and a backend without
// a maker fails to compile there.
//
//   the built-in store  MakeStoreClusterNode  store_cluster_node.cc
//   etcd                MakeEtcdClusterNode   etcd/etcd_cluster_node.cc
//
// Outside the front end, the backends' folders and the check layer, this is the one place
// that names a backend (checks.architecture holds the tree to it).
//
// Thread safety: the io_context's thread only.
#pragma once

#include <memory>

#include "base/error.h"
#include "launcher/cluster/cluster_node.h"
#include "launcher/cluster/cluster_settings.h"
#include "launcher/frontend/launch_spec.h"

namespace gculaunch {

using ClusterNodeMade = Result<std::unique_ptr<ClusterNode>>;

/// Node 0 of a job on the built-in store when `context.store` is set (this node hosts the
/// store), another node otherwise.
ClusterNodeMade MakeStoreClusterNode(const LaunchSpec& spec, const ClusterNodeSettings& settings,
                                     const ClusterNodeContext& context);

/// A node of a job on etcd (docs/etcd.md, "Job rendezvous on etcd"): it campaigns for each
/// term's leadership; the leader serves the ranks' store on MASTER_PORT and coordinates.  An
/// Error when `etcd` cannot make a client, or this node's address towards etcd is unknown.
ClusterNodeMade MakeEtcdClusterNode(const EtcdSettings& etcd, const LaunchSpec& spec,
                                    const ClusterNodeSettings& settings,
                                    const ClusterNodeContext& context);

/// The node of `spec`'s backend.  REQUIRES: RunsAsCluster(spec).
ClusterNodeMade MakeBackendNode(const LaunchSpec& spec, const ClusterNodeSettings& settings,
                                const ClusterNodeContext& context);

}  // namespace gculaunch
