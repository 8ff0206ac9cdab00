// The etcd side of `gculaunch check --rdzv-backend etcd`.
//
// CheckEtcd answers "can this node keep a job's rendezvous in this etcd?" with one CheckItem
// per finding, in the order the job would need them:
//   etcd-endpoint  one per endpoint: GET /version answers (server and cluster version), or
//                  the endpoint's own error (refused, timed out, not etcd)
//   etcd           fail only: no endpoint answered
//   etcd-auth      with a user: etcd accepted the user and password (a wrong password is one
//                  line naming the user and the fix)
//   etcd-write     a probe key <key_prefix>check/<probe_name> is written under a short lease,
//                  read back and deleted (the lease is revoked): the user may write there
// Every request is bounded by the client's connect and request timeouts; the whole check by
// a deadline derived from them, so an unreachable etcd never hangs the check.
//
// Thread safety: CheckEtcd runs its own io_context on the calling thread and blocks.
#pragma once

#include <string>
#include <vector>

#include "base/error.h"
#include "etcd/client.h"
#include "launcher/check/preflight.h"
#include "launcher/frontend/etcd_settings.h"

namespace gculaunch {

/// Runs the checks above; `probe_name` names the probe key ("host-1234").  `options` are the
/// client's options as MakeEtcdClientOptions (launcher/cluster/etcd/etcd_options.h) made them from
/// `settings`; app/ passes them in, because the check layer may not include the cluster layer.
/// An Error there (an endpoint that cannot be parsed) is the check's one finding.
std::vector<CheckItem> CheckEtcd(const Result<etcd::ClientOptions>& options,
                                 const EtcdSettings& settings, const std::string& probe_name);

}  // namespace gculaunch
