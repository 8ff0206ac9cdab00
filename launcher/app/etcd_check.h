// The etcd side of `gculaunch check --rdzv-backend etcd`, and the one place that turns the
// spec's EtcdSettings into the etcd client's options.
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

/// The etcd client's options for the job's settings (endpoints, user, timeouts). An Error
/// when the settings ask for something the client cannot do (TLS, until the client has it).
Result<etcd::ClientOptions> MakeEtcdClientOptions(const EtcdSettings& settings);

/// Runs the checks above; `probe_name` names the probe key ("host-1234").
std::vector<CheckItem> CheckEtcd(const EtcdSettings& settings, const std::string& probe_name);

}  // namespace gculaunch
