#include "launcher/cluster/etcd/etcd_options.h"

#include <string>
#include <utility>
#include <vector>

#include "base/duration.h"
#include "base/text.h"

namespace gculaunch {

Result<etcd::ClientOptions> MakeEtcdClientOptions(const EtcdSettings& settings) {
  // The spec keeps the endpoints without a scheme and TLS as one switch for all of them.
  std::vector<std::string> urls;
  for (const std::string& e : settings.endpoints) {
    urls.push_back((settings.tls ? "https://" : "http://") + e);
  }
  auto endpoints = etcd::ParseEndpoints(Join(urls, ","));
  if (!endpoints.ok()) return endpoints.error();
  etcd::ClientOptions options;
  options.endpoints = std::move(*endpoints);
  options.tls.ca_file = settings.ca_cert;
  options.tls.cert_file = settings.cert;
  options.tls.key_file = settings.key;
  options.user = settings.user;
  options.password = settings.password;
  options.request_timeout = SecondsToMillis(settings.request_timeout_s);
  return options;
}

}  // namespace gculaunch
