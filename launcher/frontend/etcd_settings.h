// EtcdSettings: the etcd rendezvous as the command line asks for it (--rdzv-backend etcd).
//
// gculaunch speaks etcd's v3 API (over its HTTP/JSON gateway), whichever of torchrun's two
// spellings is given: `etcd` and `etcd-v2` are the same backend here, and etcd needs no
// --enable-v2. The front end only checks and carries the settings; the app layer turns them
// into the etcd client's options (the spec may not use the etcd layer, docs/architecture.md).
//
// Inputs: --rdzv-endpoint HOST[:PORT][,HOST[:PORT]...] (each may start with http:// or
// https://; PORT defaults to 2379), --rdzv-id (the job's keys live under
// <etcd_prefix>/<rdzv-id>/; torchrun's default `none` is refused so that the leftovers of an
// earlier run are never adopted), and the --rdzv-conf keys below (torchrun's names of both of
// its etcd backends are accepted; docs/etcd.md has the table):
//   protocol        http|https                     (both torchrun backends)
//   cacert, ca_cert CA file (PEM)                  (etcd; etcd-v2)
//   cert, ssl_cert  client certificate (PEM)       (etcd; etcd-v2)
//   key, ssl_cert_key  the certificate's key       (etcd; etcd-v2)
//   etcd_prefix     root of gculaunch's keys, default /gculaunch (etcd backend's key)
//   user, username  etcd user;  password, password_file  its password (or, instead of
//                   both, the variable GCULAUNCH_ETCD_PASSWORD, which no rank inherits)
//   lease_ttl       seconds a node's lease lives without a refresh: etcd's silence bound;
//                   default half of --node-timeout (15), never above --node-timeout
//   read_timeout    seconds one request may take, default 5 (etcd-v2's key)
// https, an https:// endpoint or any certificate key means TLS.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace gculaunch {

struct CliOptions;  // cli.h
class FileAccess;   // file_access.h

struct EtcdSettings {
  std::string backend = "etcd";            ///< as given: "etcd" or "etcd-v2" (the same backend)
  std::vector<std::string> endpoints;      ///< "host:port" or "[v6]:port", without a scheme
  std::string etcd_prefix = "/gculaunch";  ///< without a trailing '/'
  std::string rdzv_id;
  std::string key_prefix;  ///< etcd_prefix + "/" + rdzv_id + "/": every key of the job
  bool tls = false;        ///< https, an https:// endpoint, or a certificate file given
  std::string ca_cert;     ///< cacert / ca_cert
  std::string cert;        ///< cert / ssl_cert
  std::string key;         ///< key / ssl_cert_key
  std::string user;        ///< empty: no authentication
  std::string password;
  int lease_ttl_s = 15;          ///< lease_ttl, else half of --node-timeout
  double request_timeout_s = 5;  ///< read_timeout

  bool operator==(const EtcdSettings&) const = default;
  /// One line for the dry run and the check, without the password:
  /// "endpoints 10.0.0.5:2379,10.0.0.6:2379, keys /gculaunch/job-42/, lease TTL 10 s, ...".
  std::string Describe() const;
};

/// True for the --rdzv-conf keys only the etcd backend reads.
bool IsEtcdConfKey(const std::string& key);

/// The environment variable that may hold the etcd password instead of --rdzv-conf password=
/// or password_file=; BuildRankEnv removes it from every rank's environment.
inline constexpr char kEtcdPasswordEnv[] = "GCULAUNCH_ETCD_PASSWORD";

/// What is wrong with one etcd --rdzv-conf value, and an example of a right one.
struct EtcdConfProblem {
  std::string problem;
  std::string example;  ///< "lease_ttl=10"
};
/// nullopt when `value` is fine for `key`. REQUIRES: IsEtcdConfKey(key).
std::optional<EtcdConfProblem> CheckEtcdConfValue(const std::string& key, const std::string& value);

/// Whether `backend` (--rdzv-backend's value) names the etcd backend.
bool IsEtcdBackend(const std::string& backend);

/// The settings of --rdzv-backend etcd; `run_id` is the job's id as MakeLaunchSpec decided it
/// (--rdzv-id or --run-id; "none" when neither was given). Errors are one line naming the flag
/// or key and the fix. `files` checks that certificate files exist and reads password_file.
/// `env_password`: GCULAUNCH_ETCD_PASSWORD's value (empty: not set), the password when
/// --rdzv-conf gives neither password nor password_file (giving two of them is an error).
/// REQUIRES: options.rdzv_backend names the etcd backend.
Result<EtcdSettings> MakeEtcdSettings(const CliOptions& options, const std::string& run_id,
                                      const FileAccess& files,
                                      const std::string& env_password = "");

}  // namespace gculaunch
