// MakeEtcdClientOptions: the one place that turns the launch spec's EtcdSettings (the frontend
// keeps them as plain values, it may not use the etcd layer) into the etcd client's options.
// A job on etcd (etcd_cluster_node.h) and `gculaunch check --rdzv-backend etcd`
// (launcher/check/etcd_check.h, which gets the options from app/) both start from it.
//
// Thread safety: a pure function.
#pragma once

#include "base/error.h"
#include "etcd/client.h"
#include "launcher/frontend/etcd_settings.h"

namespace gculaunch {

/// The etcd client's options for the job's settings: endpoints (https:// with TLS), TLS files,
/// user and password, request timeout.  An Error when an endpoint cannot be parsed.
Result<etcd::ClientOptions> MakeEtcdClientOptions(const EtcdSettings& settings);

}  // namespace gculaunch
