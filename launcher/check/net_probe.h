// NetworkProbe: the three network questions of `gculaunch check`: does the
// master's name resolve, could this node's store listen on the port, and does
// something accept connections at master:port.  Interface names are not
// here: they are read from /sys/class/net through the DeviceProbe (so a fake
// tree can hold them).
//
// Tests use the real probe on loopback (port 0, a listener of their own) and
// fakes for everything else.  Thread safety: LocalNetworkProbe has no state.
#pragma once

#include <string>
#include <vector>

#include "base/error.h"

namespace gculaunch {

struct ConnectOutcome {
  enum class Kind {
    kConnected,
    kRefused,      ///< the host answered: nothing listens on the port
    kTimedOut,     ///< no answer before the deadline (filtered, or the host is down)
    kUnreachable,  ///< any other error: `error` says which
  };
  Kind kind = Kind::kConnected;
  std::string address;  ///< the numeric address tried last, e.g. "10.0.0.1"
  std::string error;    ///< strerror text for kRefused/kUnreachable
};

class NetworkProbe {
 public:
  virtual ~NetworkProbe() = default;
  /// The numeric addresses `host` resolves to (IPv4 and IPv6, resolver
  /// order).  The error's `what` is the resolver's message.
  virtual Result<std::vector<std::string>> Resolve(const std::string& host) const = 0;
  /// Whether a TCP server could listen on `port` on every address, as the
  /// store would (SO_REUSEADDR, so sockets in TIME_WAIT do not count).  The
  /// error's `what` is the bind error ("Address already in use").
  virtual Status CanListen(int port) const = 0;
  /// Tries each address of `host` until one accepts a TCP connection to
  /// `port` within `timeout_s` seconds each.
  virtual ConnectOutcome Connect(const std::string& host, int port, double timeout_s) const = 0;
};

/// The real probe: getaddrinfo, bind, non-blocking connect with poll.
class LocalNetworkProbe : public NetworkProbe {
 public:
  Result<std::vector<std::string>> Resolve(const std::string& host) const override;
  Status CanListen(int port) const override;
  ConnectOutcome Connect(const std::string& host, int port, double timeout_s) const override;
};

}  // namespace gculaunch
