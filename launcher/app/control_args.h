// The command line shared by the control-socket clients `gculaunch stacks` and `gculaunch
// status`: which job to ask (--job RUN_ID, --node N, --pid PID), how long to wait for its
// answer (--timeout SECONDS), the loop over FLAG VALUE pairs with -h/--help, and writing an
// answer out whole.  Each client adds its own flags through a callback.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "launcher/ops/control_socket.h"

namespace gculaunch {

struct ControlArgs {
  ControlSelector selector;
  double timeout_s = 0;  ///< the client's default until --timeout is given
  bool help = false;     ///< -h/--help was given; nothing after it is read
};

/// A client's own flag: parses `value` of `flag` (one it named in `own_flags`).
using OwnFlag = std::function<Status(const std::string& flag, const std::string& value)>;

/// Reads `args` (after the subcommand `command`, e.g. "status") as FLAG VALUE pairs into
/// `args_out`; flags in `own_flags` go to `own`.  Errors are one line starting with
/// "gculaunch <command>: " and name the fix.
Status ParseControlArgs(const std::string& command, const std::vector<std::string>& args,
                        const std::vector<std::string>& own_flags, const OwnFlag& own,
                        ControlArgs* args_out);

/// `value` as seconds in (0, max], or nullopt.
std::optional<double> ParseSeconds(const std::string& value, double max);

/// Writes all of `text` to `fd` (retrying short writes and EINTR; gives up on an error).
void WriteAll(int fd, const std::string& text);

}  // namespace gculaunch
