#include "launcher/frontend/rdzv_backend.h"

#include <iterator>

namespace gculaunch {

namespace {

// One row per alternative of RdzvBackend, in its order.
constexpr RdzvCapabilities kCapabilities[] = {
    {.name = "c10d",
     .elected_leader = false,
     .leader_name = "",
     .hang_watch = true,
     .job_secret = true,
     .keys_protected_by = "",
     .elastic = true},
    // The hang watch would have to move with the leader from term to term (docs/etcd.md,
    // "When etcd itself fails, and what is not there yet"); etcd's own authentication
    // guards the keys.
    {.name = "etcd",
     .elected_leader = true,
     .leader_name = "the job's leader in etcd",
     .hang_watch = false,
     .job_secret = false,
     .keys_protected_by =
         "the job's keys live in etcd, whose own authentication (user and password, TLS) "
         "protects them (docs/etcd.md)",
     .elastic = true},
};
static_assert(std::size(kCapabilities) == std::variant_size_v<RdzvBackend>,
              "one row of capabilities per rendezvous backend");

}  // namespace

const RdzvCapabilities& CapabilitiesOf(const RdzvBackend& backend) {
  return kCapabilities[backend.index()];
}

}  // namespace gculaunch
