#include "launcher/frontend/etcd_settings.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <map>
#include <string_view>
#include <utility>

#include "base/text.h"
#include "launcher/frontend/cli.h"
#include "launcher/frontend/file_access.h"

namespace gculaunch {
namespace {

constexpr int kDefaultEtcdPort = 2379;
constexpr const char* kIdFix = "give the job's name, the same on every node: --rdzv-id $JOB_NAME";

// A key and the other names it may be given under (torchrun's etcd-v2 names, our aliases).
struct KeyNames {
  const char* key;
  const char* alias;  ///< nullptr: none
};
constexpr KeyNames kKeys[] = {
    {"protocol", nullptr},   {"cacert", "ca_cert"},      {"cert", "ssl_cert"},
    {"key", "ssl_cert_key"}, {"etcd_prefix", nullptr},   {"user", "username"},
    {"password", nullptr},   {"password_file", nullptr}, {"lease_ttl", nullptr},
};

bool HasBlank(std::string_view text) {
  return std::any_of(text.begin(), text.end(),
                     [](unsigned char c) { return std::isspace(c) != 0 || c < 0x20; });
}

std::optional<int> ParseTtl(const std::string& text) {
  auto n = ParseInteger(text);
  if (!n || *n < 2 || *n > 86400) return std::nullopt;
  return static_cast<int>(*n);
}

// One entry of an endpoint list: "[http[s]://]host[:port]" -> "host:port" ("[v6]:port").
Result<std::string> ParseOneEndpoint(const std::string& source, const std::string& list,
                                     std::string entry, std::string& scheme) {
  const auto bad = [&](const std::string& problem) {
    return Error{source + " '" + list + "': " + problem,
                 "give HOST:PORT[,HOST:PORT...], e.g. " + source + " 10.0.0.5:2379,10.0.0.6:2379"};
  };
  scheme.clear();
  if (const size_t sep = entry.find("://"); sep != std::string::npos) {
    scheme = Lower(entry.substr(0, sep));
    if (scheme != "http" && scheme != "https") {
      return bad("'" + entry + "' has the scheme " + scheme + "; etcd speaks http or https");
    }
    entry = entry.substr(sep + 3);
  }
  while (!entry.empty() && entry.back() == '/') entry.pop_back();
  std::string host = entry;
  std::string port_text;
  if (!entry.empty() && entry.front() == '[') {
    const size_t close = entry.find(']');
    if (close == std::string::npos || close == 1) return bad("'" + entry + "': bad [IPv6]");
    host = entry.substr(0, close + 1);
    const std::string rest = entry.substr(close + 1);
    if (!rest.empty() && (rest.front() != ':' || rest.size() == 1)) {
      return bad("'" + entry + "': expected [IPv6]:PORT");
    }
    if (!rest.empty()) port_text = rest.substr(1);
  } else if (const size_t colon = entry.find(':'); colon != std::string::npos) {
    if (entry.find(':', colon + 1) != std::string::npos) {
      return bad("'" + entry + "': an IPv6 address needs brackets, [ADDR]:PORT");
    }
    host = entry.substr(0, colon);
    port_text = entry.substr(colon + 1);
    if (port_text.empty()) return bad("'" + entry + "' has no port after ':'");
  }
  if (host.empty() || HasBlank(host) || host.find('/') != std::string::npos) {
    return bad("'" + entry + "' is not HOST[:PORT]");
  }
  int port = kDefaultEtcdPort;
  if (!port_text.empty()) {
    auto n = ParseInteger(port_text);
    if (!n || *n < 1 || *n > 65535) return bad("'" + entry + "': the port must be 1-65535");
    port = static_cast<int>(*n);
  }
  return host + ":" + std::to_string(port);
}

// Endpoints from --rdzv-endpoint (one, or a list); `https` tells whether they said https://.
Result<std::vector<std::string>> Endpoints(const CliOptions& o, std::optional<bool>& https) {
  const std::string source = o.Source("rdzv-endpoint");
  std::string text;
  if (o.rdzv_endpoint_list) {
    text = *o.rdzv_endpoint_list;
  } else if (o.rdzv_endpoint) {
    const Endpoint& e = *o.rdzv_endpoint;
    text = (e.host.find(':') != std::string::npos ? "[" + e.host + "]" : e.host) +
           (e.port ? ":" + std::to_string(*e.port) : "");
  } else {
    return Error{"--rdzv-backend etcd needs the etcd endpoints",
                 "give --rdzv-endpoint HOST:2379[,HOST:2379...] (etcd's client URLs)"};
  }
  std::vector<std::string> endpoints;
  std::string first_scheme;
  for (const std::string& item : Split(text, ',')) {
    std::string scheme;
    auto one = ParseOneEndpoint(source, text, Trim(item), scheme);
    if (!one.ok()) return one.error();
    if (!scheme.empty()) {
      if (!first_scheme.empty() && scheme != first_scheme) {
        return Error{source + " '" + text + "' mixes http:// and https://",
                     "use one scheme for every endpoint"};
      }
      first_scheme = scheme;
      https = scheme == "https";
    }
    if (std::find(endpoints.begin(), endpoints.end(), *one) == endpoints.end()) {
      endpoints.push_back(*one);
    }
  }
  return endpoints;
}

// --rdzv-conf's etcd keys with their aliases folded in; two names of one key that disagree
// are an error.
Result<std::map<std::string, std::string>> FoldedConf(const CliOptions& o) {
  std::map<std::string, std::string> conf;
  for (const KeyNames& names : kKeys) {
    std::optional<std::string> value;
    for (const char* name : {names.key, names.alias}) {
      if (name == nullptr) continue;
      auto it = o.rdzv_conf.find(name);
      if (it == o.rdzv_conf.end()) continue;
      if (value && *value != it->second) {
        return Error{o.Source("rdzv-conf") + ": '" + names.key + "' and '" + names.alias +
                         "' are two names of one setting and disagree",
                     "give only one of them"};
      }
      value = it->second;
    }
    if (value) conf[names.key] = *value;
  }
  return conf;
}

std::string Get(const std::map<std::string, std::string>& conf, const char* key) {
  auto it = conf.find(key);
  return it == conf.end() ? std::string() : it->second;
}

// protocol, the certificate files: whether TLS is wanted and with which files.
Status Tls(const CliOptions& o, const std::map<std::string, std::string>& conf,
           std::optional<bool> https, const FileAccess& files, EtcdSettings& s) {
  const std::string source = o.Source("rdzv-conf");
  s.ca_cert = Get(conf, "cacert");
  s.cert = Get(conf, "cert");
  s.key = Get(conf, "key");
  const bool files_given = !s.ca_cert.empty() || !s.cert.empty() || !s.key.empty();
  if (conf.count("protocol") != 0) {
    const bool want = Lower(conf.at("protocol")) == "https";
    if (https && *https != want) {
      return Error{source + " protocol=" + conf.at("protocol") + " disagrees with the scheme of " +
                       o.Source("rdzv-endpoint"),
                   "drop protocol, or give the endpoints without a scheme"};
    }
    if (!want && files_given) {
      return Error{source + " protocol=http with a certificate file: the files need https",
                   "use protocol=https, or drop cacert/cert/key"};
    }
    https = want;
  }
  s.tls = https.value_or(false) || files_given;
  if (!s.key.empty() && s.cert.empty()) {
    return Error{source + " key=" + s.key + " without cert: a key belongs to a certificate",
                 "add cert=CLIENT.pem (ssl_cert), or drop key"};
  }
  for (const auto& [name, path] : {std::pair<const char*, const std::string*>{"cacert", &s.ca_cert},
                                   {"cert", &s.cert},
                                   {"key", &s.key}}) {
    if (!path->empty() && !files.FileExists(*path)) {
      return Error{source + " " + name + "=" + *path + ": no such file",
                   "give the path of the PEM file, readable on every node"};
    }
  }
  return OkStatus();
}

Status Auth(const CliOptions& o, const std::map<std::string, std::string>& conf,
            const FileAccess& files, const std::string& env_password, EtcdSettings& s) {
  const std::string source = o.Source("rdzv-conf");
  s.user = Get(conf, "user");
  s.password = Get(conf, "password");
  const std::string password_file = Get(conf, "password_file");
  if (!env_password.empty()) {
    if (!s.password.empty() || !password_file.empty()) {
      return Error{source + ": " + (s.password.empty() ? "password_file" : "password") +
                       " given while " + kEtcdPasswordEnv + " is set",
                   "give the password one way only: unset " + std::string(kEtcdPasswordEnv) +
                       ", or drop it from " + source};
    }
    s.password = env_password;
  }
  if (!password_file.empty()) {
    if (!s.password.empty()) {
      return Error{source + ": password and password_file both given", "give only one of them"};
    }
    auto text = files.ReadTextFile(password_file);
    if (!text.ok()) {
      return Error{source + " password_file=" + password_file + ": " + text.error().what,
                   text.error().hint.empty() ? "give a readable file holding the etcd password"
                                             : text.error().hint};
    }
    s.password = *text;
    while (!s.password.empty() && (s.password.back() == '\n' || s.password.back() == '\r')) {
      s.password.pop_back();
    }
    if (s.password.empty()) {
      return Error{source + " password_file=" + password_file + " is empty",
                   "write the etcd password into it"};
    }
  }
  if (s.user.empty() && !env_password.empty()) {
    return Error{std::string(kEtcdPasswordEnv) + " is set but " + source + " names no user",
                 "add user=NAME (the etcd user the password belongs to), or unset " +
                     std::string(kEtcdPasswordEnv)};
  }
  if (s.user.empty() && !s.password.empty()) {
    return Error{source + ": a password without a user",
                 "add user=NAME (the etcd user the password belongs to)"};
  }
  if (!s.user.empty() && s.password.empty()) {
    return Error{source + " user=" + s.user + " without a password",
                 "add password_file=PATH, or set " + std::string(kEtcdPasswordEnv)};
  }
  return OkStatus();
}

// The lease is etcd's silence bound for a node (docs/etcd.md, "Liveness"): half of
// --node-timeout unless given (the floor of the built-in store's bound, so a pause of two
// thirds of it survives), and never above --node-timeout.
Status LeaseTtl(const CliOptions& o, const std::map<std::string, std::string>& conf,
                EtcdSettings& s) {
  const double node_timeout = o.node_timeout.value_or(kDefaultNodeTimeout);
  const std::string ttl = Get(conf, "lease_ttl");
  if (ttl.empty()) {
    s.lease_ttl_s = static_cast<int>(std::clamp(node_timeout / 2, 2.0, 86400.0));
    return OkStatus();
  }
  s.lease_ttl_s = *ParseTtl(ttl);
  if (s.lease_ttl_s <= node_timeout) return OkStatus();
  return Error{o.Source("rdzv-conf") + " lease_ttl=" + ttl + " is longer than --node-timeout " +
                   Seconds(std::chrono::duration<double>(node_timeout), -1) +
                   ": etcd would keep a silent node longer than the job allows",
               "give lease_ttl at most --node-timeout (e.g. lease_ttl=" +
                   std::to_string(std::max(2, static_cast<int>(node_timeout / 2))) +
                   "), or raise --node-timeout"};
}

}  // namespace

std::string EtcdSettings::Describe() const {
  std::string line =
      "endpoints " + Join(endpoints, ",") + ", keys " + key_prefix + ", lease TTL " +
      std::to_string(lease_ttl_s) + " s, request timeout " +
      Seconds(std::chrono::duration<double>(request_timeout_s), -1) + ", " +
      (user.empty() ? std::string("no authentication") : "user " + user + " (password given)") +
      ", ";
  if (!tls) return line + "no TLS";
  std::vector<std::string> parts;
  if (!ca_cert.empty()) parts.push_back("CA " + ca_cert);
  if (!cert.empty()) parts.push_back("cert " + cert);
  if (!key.empty()) parts.push_back("key " + key);
  return line + "TLS" + (parts.empty() ? "" : " (" + Join(parts, ", ") + ")");
}

bool IsEtcdConfKey(const std::string& key) {
  return std::any_of(std::begin(kKeys), std::end(kKeys), [&](const KeyNames& names) {
    return key == names.key || (names.alias != nullptr && key == names.alias);
  });
}

std::optional<EtcdConfProblem> CheckEtcdConfValue(const std::string& key,
                                                  const std::string& value) {
  if (key == "protocol") {
    const std::string lower = Lower(value);
    if (lower == "http" || lower == "https") return std::nullopt;
    return EtcdConfProblem{"'protocol' expects http or https", "protocol=https"};
  }
  if (key == "lease_ttl") {
    if (ParseTtl(value)) return std::nullopt;
    return EtcdConfProblem{"'lease_ttl' expects whole seconds, 2 to 86400", "lease_ttl=10"};
  }
  if (key == "etcd_prefix") {
    if (!value.empty() && value.front() == '/' && !HasBlank(value)) return std::nullopt;
    return EtcdConfProblem{"'etcd_prefix' expects a key path starting with '/'",
                           "etcd_prefix=/gculaunch"};
  }
  if (value.empty()) {
    return EtcdConfProblem{"'" + key + "' needs a value",
                           key + (key == "user" || key == "username" ? "=trainer" : "=...")};
  }
  return std::nullopt;
}

bool IsEtcdBackend(const std::string& backend) { return backend == "etcd" || backend == "etcd-v2"; }

Result<EtcdSettings> MakeEtcdSettings(const CliOptions& o, const std::string& run_id,
                                      const FileAccess& files, const std::string& env_password) {
  EtcdSettings s;
  s.backend = o.rdzv_backend.value_or("etcd");
  const std::string id_source = o.rdzv_id ? o.Source("rdzv-id") : o.Source("run-id");
  if (run_id.empty() || (!o.rdzv_id && !o.run_id)) {
    return Error{"--rdzv-backend " + s.backend +
                     " needs --rdzv-id: it names the job's keys in etcd (<etcd_prefix>/<id>/)",
                 kIdFix};
  }
  if (run_id == "none") {
    return Error{id_source +
                     " 'none' (torchrun's default) cannot name an etcd job: every job "
                     "would share the keys, and a crashed run's leftovers be adopted",
                 kIdFix};
  }
  s.rdzv_id = run_id;
  std::optional<bool> https;
  auto endpoints = Endpoints(o, https);
  if (!endpoints.ok()) return endpoints.error();
  s.endpoints = std::move(*endpoints);
  auto conf = FoldedConf(o);
  if (!conf.ok()) return conf.error();
  if (Status tls = Tls(o, *conf, https, files, s); !tls.ok()) return tls.error();
  if (Status auth = Auth(o, *conf, files, env_password, s); !auth.ok()) return auth.error();
  if (std::string prefix = Get(*conf, "etcd_prefix"); !prefix.empty()) {
    while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
    s.etcd_prefix = prefix;
  }
  s.key_prefix = s.etcd_prefix + "/" + s.rdzv_id + "/";
  if (Status ttl = LeaseTtl(o, *conf, s); !ttl.ok()) return ttl.error();
  if (auto it = o.rdzv_conf.find("read_timeout"); it != o.rdzv_conf.end()) {
    const double seconds = std::strtod(it->second.c_str(), nullptr);
    if (seconds <= 0) {
      return Error{o.Source("rdzv-conf") + " read_timeout=" + it->second +
                       ": one etcd request needs more than 0 seconds",
                   "e.g. read_timeout=5"};
    }
    s.request_timeout_s = seconds;
  }
  return s;
}

}  // namespace gculaunch
