#include "launcher/cluster/rdzv_backends.h"

#include <variant>

namespace gculaunch {

namespace {

// std::visit refuses to compile while an alternative of RdzvBackend has no overload here.
template <typename... Makers>
struct OneMakerEach : Makers... {
  using Makers::operator()...;
};
template <typename... Makers>
OneMakerEach(Makers...) -> OneMakerEach<Makers...>;

}  // namespace

ClusterNodeMade MakeBackendNode(const LaunchSpec& spec, const ClusterNodeSettings& settings,
                                const ClusterNodeContext& context) {
  return std::visit(
      OneMakerEach{
          [&](const StoreRendezvous&) { return MakeStoreClusterNode(spec, settings, context); },
          [&](const EtcdSettings& etcd) {
            return MakeEtcdClusterNode(etcd, spec, settings, context);
          },
      },
      spec.rdzv);
}

}  // namespace gculaunch
