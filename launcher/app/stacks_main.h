// StacksMain: `gculaunch stacks [--job RUN_ID] [--node N] [--pid PID] [--timeout SECONDS]`,
// every rank's Python stacks of a job running on this node (on node 0 of a multi-node job,
// every node's, gathered through the job board), without stopping it.
//
// It finds the launches of this user by their control sockets (launcher/ops/control_socket.h:
// FindControlEndpoint lists the user's control directory, skips stale sockets and selects one
// launch: the only one, the one the selector names, or the only one in this network
// namespace), asks it for "stacks", and prints the answer: where it came from (run id, node,
// host, gculaunch's pid), every rank's dump, the ranks that could not be dumped and why, and
// the ranks whose stacks differ from the majority.  The ranks need the stack-dump hook
// (--stack-dumps, or --hang-timeout); a rank without it is reported, never signalled.
//
// Exit codes: 0 every rank was dumped; 1 no launch (or several, without a selector), no
// answer, or some rank could not be dumped; 2 a usage error.
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
