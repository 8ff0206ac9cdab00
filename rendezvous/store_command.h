// StoreMain: `gculaunch store`, the rendezvous store alone in the foreground.
//
//   gculaunch store [--host H] [--port P] [--max-connections N] [--max-key-size B]
//                   [--max-value-size B] [--max-keys-per-request N] [--max-request-size B]
//                   [--log-level L] [--upstream HOST:PORT]
//
// The first line on stdout is "listening on H:P" with the real port (port 0 picks a free
// one), flushed at once, so a script can start the store and read where it is.  Logs go to
// stderr.  SIGTERM or SIGINT stops it cleanly (exit 0).  The soft open-file limit is raised
// to the hard limit first, since every client connection is a file descriptor.
//
// With --upstream it serves as a store proxy (proxy.h) in front of that gculaunch store, as
// --store-proxy does on every node but node 0: the tests run torch's clients through it.
//
// Exit codes: 0 stopped by a signal; 1 could not listen; 2 bad flags (one line on stderr
// naming the flag and the fix); 3 (--upstream) the upstream store was not reached within a
// minute, or was lost.
//
// ParseStoreArgs is the CLI11 adapter (the only place that may see CLI11's exceptions); it
// has no side effects, so tests can call it.
//
// Threading: StoreMain runs one io_context on the calling thread.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "base/error.h"
#include "rendezvous/codec.h"

namespace gculaunch::rendezvous {

/// What `gculaunch store` was asked to do.
struct StoreCommandOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 29500;
  std::size_t max_connections = 65536;
  Limits limits;
  std::string log_level = "info";
  /// --upstream HOST:PORT: run a store proxy (proxy.h) in front of that store instead of a
  /// store.  Empty host: a store.
  std::string upstream_host;
  std::uint16_t upstream_port = 0;
};

/// The soft open-file limit (RLIMIT_NOFILE) before and after RaiseOpenFileLimit.
struct OpenFileLimit {
  std::uint64_t before = 0;
  std::uint64_t now = 0;
  std::string error;  ///< why it could not be read or raised; empty when it was fine
};

/// Raises the soft open-file limit to the hard one (`gculaunch store` and a launch: every
/// store connection is a descriptor).  A launch gives its ranks `before` back.
OpenFileLimit RaiseOpenFileLimit();

/// Either options to run with, or text to print on stdout before exiting 0 (--help).
struct StoreHelp {
  std::string text;
};
using StoreCommand = std::variant<StoreCommandOptions, StoreHelp>;

/// Parses the arguments after "store".  Errors name the flag and the fix.
Result<StoreCommand> ParseStoreArgs(const std::vector<std::string>& args);

/// Runs the standalone store with the arguments after "store".  Returns the exit code.
int StoreMain(const std::vector<std::string>& args);

}  // namespace gculaunch::rendezvous
