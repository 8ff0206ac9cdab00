// StacksMain: `gculaunch stacks [--pid PID] [--timeout SECONDS]`, every local rank's Python
// stacks of the job running on this node, without stopping it.
//
// It finds the launches of this node (this network namespace) by their control sockets in
// /proc/net/unix ("@gculaunch/<pid>", launcher/run/control_socket.h), asks each one (or only
// --pid) for "stacks", and prints each answer: where it came from (run id, node, host,
// gculaunch's pid), every rank's dump, the ranks that could not be dumped and why, and the
// ranks whose stacks differ from the majority.  The ranks need the stack-dump hook
// (--stack-dumps, or --hang-timeout); a rank without it is reported, never signalled.
//
// Exit codes: 0 every rank of every launch asked was dumped; 1 no launch was found, one did
// not answer, or some rank could not be dumped; 2 a usage error.
//
// Thread safety: called once from main().
#pragma once

#include <string>
#include <vector>

#include "base/env_map.h"

namespace gculaunch {

/// Runs `gculaunch stacks` with the arguments after "stacks"; prints the reports to stdout
/// and problems to stderr.
int StacksMain(const std::vector<std::string>& args, const EnvMap& env);

}  // namespace gculaunch
