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
  pid_t pid_ = -1;
};

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then closed).
std::uint16_t FreeLoopbackPort();

}  // namespace gculaunch::testing
