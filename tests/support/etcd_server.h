// EtcdServer: a real, single-member etcd (Debian's etcd-server, 3.4) for tests.
//
// Starts `etcd` on 127.0.0.1 with a free client port and a free peer port and a data
// directory of its own (removed at the end), in a process group of its own, and returns once
// the member answers GET /health. Stop() ends that group (SIGTERM, then SIGKILL after 5 s) and
// reaps it (and etcd gets SIGTERM by itself when the test process dies without stopping it);
// Start() again runs a new etcd on the same ports and data directory (the keys, the
// revisions and the users survive, tokens do not). etcd's own output goes to etcd.log in the
// data directory and is printed when it fails to start.
//
// With Options::cert_file and key_file, etcd serves https:// on its client port (its health is
// then polled on a plain metrics port of its own); trusted_ca_file and client_cert_auth add
// etcd's --trusted-ca-file and --client-cert-auth.
//
// When no etcd binary is installed the test FAILS with a line telling to run
// scripts/bootstrap.sh: a missing server never counts as a pass.
//
// Thread safety: the test's thread only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "tests/support/test_util.h"

namespace gculaunch::testing {

class EtcdServer {
 public:
  struct Options {
    /// etcd's --auth-token-ttl in seconds (simple tokens; etcd's default is 300); 0: default.
    int auth_token_ttl = 0;
    /// TLS on the client port (--cert-file, --key-file, https:// client URLs); "": plain.
    std::string cert_file;
    std::string key_file;
    /// --trusted-ca-file: the CA that client certificates must chain to.
    std::string trusted_ca_file;
    /// --client-cert-auth: refuse clients without a certificate signed by trusted_ca_file.
    bool client_cert_auth = false;
  };

  /// Starts etcd (a test failure when it cannot).
  explicit EtcdServer(Options options);
  EtcdServer() : EtcdServer(Options{}) {}
  ~EtcdServer();
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

  void Start();
  void Stop();

  /// "127.0.0.1:<client port>".
  std::string endpoint() const;
  /// The client URL: "https://127.0.0.1:<client port>" with TLS, else "http://...".
  std::string url() const;
  std::uint16_t client_port() const { return client_port_; }
  pid_t pid() const { return pid_; }
  const std::string& data_dir() const { return data_dir_; }

 private:
  bool Healthy() const;

  Options options_;
  TempDir dir_;
  std::string data_dir_;
  std::string binary_;
  std::uint16_t client_port_ = 0;
  std::uint16_t peer_port_ = 0;
  std::uint16_t health_port_ = 0;  ///< the client port, or the metrics port with TLS
  pid_t pid_ = -1;
};

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then closed).
std::uint16_t FreeLoopbackPort();

}  // namespace gculaunch::testing
