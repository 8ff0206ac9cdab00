// ControlSocket: how `gculaunch stacks` reaches a running gculaunch.
//
// A running launch listens on an abstract Unix socket named "gculaunch/<pid>" (no file: it
// disappears with the process, and nothing is left behind after a SIGKILL).  Abstract names
// belong to a network namespace, so `gculaunch stacks` finds exactly the launches of its own
// node (network namespace) in /proc/net/unix (shown there as "@gculaunch/<pid>").
//
// Protocol, one request per connection: the client sends one line, the command ("stacks");
// gculaunch answers with text and closes.  An unknown command gets "error: unknown command
// '<cmd>'" and a close.  Only a peer with gculaunch's own user id, or root, is served
// (SO_PEERCRED); others are closed without an answer.  A request line longer than 256 bytes,
// or one not complete within 5 s, ends the connection.  The socket and every accepted
// connection are close-on-exec, so no rank inherits them.
//
// Multi-node: node 0 would answer "stacks" for the whole job by asking every node's agent
// through the cluster protocol (launcher/cluster/job_protocol.h) and appending their reports;
// the Handler is where that plugs in (Job::Supervise in launcher/app/job.cc).  Today every
// node answers for its own ranks only.
//
// Ownership: the socket owns its acceptor and keeps each session alive through the
// session's own pending handlers.  Stop() (or destruction) closes the acceptor; sessions
// still being answered finish on their own, and are abandoned if the io_context stops.
// Thread safety: io_context thread only.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/lifetime.h"

namespace gculaunch {

/// "gculaunch/<pid>": the abstract socket name of the launch with that pid (without the
/// leading NUL byte).
std::string ControlSocketName(pid_t pid);

/// The pids of the launches whose control socket is listed in a /proc/net/unix text (lines
/// whose path is "@gculaunch/<pid>"), sorted, without duplicates.
std::vector<int> ControlPidsFromNetUnix(const std::string& net_unix);

class ControlSocket {
 public:
  /// Called with the command and a function to send the answer with (once, at any later
  /// time, on the io_context thread).
  using Reply = std::function<void(std::string)>;
  using Handler = std::function<void(const std::string& command, Reply reply)>;

  /// Binds "gculaunch/<getpid()>" and listens.  The error names the socket and errno.
  static Result<std::unique_ptr<ControlSocket>> Listen(boost::asio::io_context& io,
                                                       Handler handler);
  ~ControlSocket();
  ControlSocket(const ControlSocket&) = delete;
  ControlSocket& operator=(const ControlSocket&) = delete;

  void Stop();
  const std::string& name() const { return name_; }

 private:
  ControlSocket(boost::asio::io_context& io, Handler handler, std::string name);
  void Accept();

  Handler handler_;
  std::string name_;
  boost::asio::local::stream_protocol::acceptor acceptor_;
  LifetimeGuard lifetime_;  ///< last member
};

}  // namespace gculaunch
