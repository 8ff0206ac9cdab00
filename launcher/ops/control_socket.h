// ControlSocket: how `gculaunch stacks` (and `gculaunch status`) reach a running gculaunch.
//
// Where: a running launch listens on a Unix socket FILE (a path socket: the abstract namespace
// has no permissions) in a per-user directory:
//   $XDG_RUNTIME_DIR/gculaunch   when XDG_RUNTIME_DIR is set and is a directory of this user,
//   /tmp/gculaunch-<uid>         otherwise.
// The directory is created with mode 0700; before any use it is checked with lstat: a real
// directory (not a symlink), owned by this user, mode exactly 0700.  Anything else is refused
// with a one-line error naming the path and the fix (another user could otherwise plant or
// read sockets there).  When what stands there belongs to another user (someone created
// /tmp/gculaunch-<uid> first: a directory, a symlink or a file this user cannot remove from
// sticky /tmp), a launch uses a fresh private directory instead,
//   /tmp/gculaunch-<uid>-XXXXXX  (mkdtemp, 0700; removed by the guardian at exit),
// says so in one warning line, and the clients look there too (PrivateControlDirs).
//
// Name: "<run id>-n<node rank>-<pid>.sock" (the run id with every byte outside [A-Za-z0-9._-]
// replaced by '_' and cut to 40 bytes).  Several jobs on one node and simulated hosts sharing
// /tmp and pid numbers (network namespaces) are told apart by it; a client lists the
// directory, parses the names (ListControlEndpoints) and picks one by --job / --node / --pid
// (SelectControlEndpoint).  A path socket does not belong to a network namespace: a client
// prefers, among several candidates, the one launch in its own network namespace.  The whole
// path must fit sun_path (at most 107 bytes): a longer one is refused with an error.
//
// Lifetime: the file is removed when the ControlSocket is stopped or destroyed; after a
// kill -9 the guardian removes it (launcher/sys/guardian.h, RemoveAtExit).  A file left over
// (connect refused, or its pid gone) is stale: clients skip it and remove it when it is
// theirs.
//
// Protocol, one request per connection: the client sends one line, "<command> [args...]"
// (words separated by spaces, at most 256 bytes, complete within 5 s); gculaunch runs the
// handler registered for the command, writes its answer (any text) and closes.  An unknown
// command is answered "error: unknown command '<cmd>' (known: a, b)\n".  Only a peer with
// gculaunch's user id, or root, is served (SO_PEERCRED); others are closed without an answer.
// Commands: "stacks" (launcher/app/launch.cc: first line "dumped <n> of <m>", then the report);
// more are added with Register() without touching this file.
//
// The socket and every accepted connection are close-on-exec, so no rank inherits them.
//
// Ownership: the socket owns its acceptor and keeps each session alive through the
// session's own pending handlers.  Stop() (or destruction) closes the acceptor and removes the
// file; sessions still being answered finish on their own.
// Thread safety: io_context thread only (the client functions: any thread).
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/lifetime.h"
#include "launcher/ops/accept_backoff.h"

namespace gculaunch {

/// The per-user directory for control sockets: "<xdg_runtime_dir>/gculaunch" when
/// `xdg_runtime_dir` is non-empty and an existing directory owned by `uid`, else
/// "/tmp/gculaunch-<uid>".
std::string ControlDirPath(const std::string& xdg_runtime_dir, uid_t uid);

/// Checks `dir` with lstat (a directory, not a symlink, owned by geteuid(), mode 0700);
/// creates it with mode 0700 first when `create` and it does not exist.
Status CheckControlDir(const std::string& dir, bool create);

/// Where a launch makes its private control directory when the usual one is another user's.
inline constexpr char kPrivateControlParent[] = "/tmp";

/// Whether something exists at `dir` (lstat) and belongs to another user than geteuid(): a
/// control directory this user can neither use nor remove.
bool ControlDirOfAnotherUser(const std::string& dir);

/// Creates a fresh private control directory "<parent>/gculaunch-<uid>-XXXXXX" (mkdtemp,
/// mode 0700) and returns its path.
Result<std::string> MakePrivateControlDir(const std::string& parent, uid_t uid);

/// This user's private control directories in `parent`, sorted: the entries named
/// "gculaunch-<uid>-*" that are real directories (lstat: not symlinks) owned by geteuid()
/// with mode exactly 0700.  Anything else of that name is ignored.
std::vector<std::string> PrivateControlDirs(const std::string& parent, uid_t uid);

/// "<run id>-n<node>-<pid>.sock" (the run id made safe, see above).
std::string ControlSocketFileName(const std::string& run_id, int node_rank, pid_t pid);

/// An error when `path` does not fit a sockaddr_un (107 bytes and the terminator).
Status CheckSocketPathLength(const std::string& path);

/// A launch found by its socket file.
struct ControlEndpoint {
  std::string path;    ///< the socket file
  std::string run_id;  ///< as in the name (made safe)
  int node_rank = -1;
  int pid = 0;
};

/// The endpoint named by `file_name` in `dir`; nullopt when the name is not one of ours.
std::optional<ControlEndpoint> ParseControlSocketName(const std::string& dir,
                                                      const std::string& file_name);

/// The live launches with a socket in `dir`, sorted by run id, node, pid.  A socket that
/// refuses connections (its launch is gone) is skipped, and removed when it is ours.
std::vector<ControlEndpoint> ListControlEndpoints(const std::string& dir);

/// Which launch a client means; empty fields match everything.
struct ControlSelector {
  std::string run_id;  ///< --job (compared after the same making safe as the name)
  int node_rank = -1;  ///< --node
  int pid = 0;         ///< --pid
};

/// The one endpoint of `all` that `selector` picks.  Among several matches, the only one
/// whose process is in the caller's network namespace wins; otherwise an error listing the
/// candidates and the selector flags to choose with (and one when none matches).
Result<ControlEndpoint> SelectControlEndpoint(const std::vector<ControlEndpoint>& all,
                                              const ControlSelector& selector);

/// What a client (`gculaunch stacks`, `gculaunch status`) does: lists the launches in this
/// user's control directories (ControlDirPath with and without `xdg_runtime_dir`, each checked
/// as CheckControlDir does, a missing one is empty; then PrivateControlDirs(`private_parent`))
/// and selects one.  A usual directory that belongs to another user is skipped (its launches
/// are in private directories).  Errors: an unsafe directory of this user's own (it can fix
/// it), none or several launches (see SelectControlEndpoint).
Result<ControlEndpoint> FindControlEndpoint(
    const std::string& xdg_runtime_dir, const ControlSelector& selector,
    const std::string& private_parent = kPrivateControlParent);

/// Sends `line` (without the newline) to the socket at `path` and returns the whole answer
/// (read until the launch closes).  Errors: cannot connect, no answer within `timeout`, or
/// the connection closed without an answer (another user's job).
Result<std::string> ControlRequest(const std::string& path, const std::string& line,
                                   std::chrono::milliseconds timeout);

class ControlSocket {
 public:
  /// Sends the answer (once, at any later time, on the io_context thread).
  using Reply = std::function<void(std::string)>;
  /// `args`: the request's words after the command.
  using Handler = std::function<void(const std::vector<std::string>& args, Reply reply)>;

  /// Binds `path` (its directory already checked; a stale file of that name is replaced)
  /// and listens.  The error names the path and errno.
  static Result<std::unique_ptr<ControlSocket>> Listen(boost::asio::io_context& io,
                                                       const std::string& path);
  ~ControlSocket();
  ControlSocket(const ControlSocket&) = delete;
  ControlSocket& operator=(const ControlSocket&) = delete;

  /// Serves `command` with `handler` from now on (replacing one of the same name).
  void Register(const std::string& command, Handler handler);
  /// Closes the acceptor and removes the file.
  void Stop();
  /// Where the one line about a failing accept goes (accept_backoff.h).
  void set_warn(AcceptBackoff::Warn warn) { backoff_.set_warn(std::move(warn)); }
  const std::string& path() const { return path_; }

 private:
  ControlSocket(boost::asio::io_context& io, std::string path);
  void Accept();
  void Dispatch(const std::string& line, Reply reply);

  std::map<std::string, Handler> handlers_;
  std::string path_;
  bool stopped_ = false;
  boost::asio::local::stream_protocol::acceptor acceptor_;
  AcceptBackoff backoff_;
  LifetimeGuard lifetime_;  ///< last member
};

}  // namespace gculaunch
