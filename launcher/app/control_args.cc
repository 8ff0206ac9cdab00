#include "launcher/app/control_args.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace gculaunch {
namespace {

std::optional<int> ParseCount(const std::string& value, int min) {
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0 || n < min || n > 1 << 30) return std::nullopt;
  return static_cast<int>(n);
}

// --job, --node, --pid, --timeout.
Status ParseCommonFlag(const std::string& prefix, const std::string& flag, const std::string& value,
                       ControlArgs* a) {
  const std::string quoted = prefix + flag + " '" + value + "' ";
  if (flag == "--job") {
    if (value.empty()) return Error{prefix + "--job is empty", "give the run id"};
    a->selector.run_id = value;
  } else if (flag == "--node") {
    auto n = ParseCount(value, 0);
    if (!n) return Error{quoted + "is not a node rank", "give a node rank, e.g. --node 1"};
    a->selector.node_rank = *n;
  } else if (flag == "--pid") {
    auto n = ParseCount(value, 1);
    if (!n) {
      return Error{quoted + "is not a process id",
                   "give the pid of a running gculaunch, e.g. --pid 4242"};
    }
    a->selector.pid = *n;
  } else {
    auto s = ParseSeconds(value, 3600);
    if (!s) {
      return Error{quoted + "is not a number of seconds",
                   "give seconds between 0 and 3600, e.g. --timeout 30"};
    }
    a->timeout_s = *s;
  }
  return OkStatus();
}

}  // namespace

std::optional<double> ParseSeconds(const std::string& value, double max) {
  char* end = nullptr;
  errno = 0;
  const double s = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno != 0 || !(s > 0) || s > max) return std::nullopt;
  return s;
}

Status ParseControlArgs(const std::string& command, const std::vector<std::string>& args,
                        const std::vector<std::string>& own_flags, const OwnFlag& own,
                        ControlArgs* args_out) {
  static const std::vector<std::string> kCommon = {"--job", "--node", "--pid", "--timeout"};
  const std::string prefix = "gculaunch " + command + ": ";
  const std::string see = "see gculaunch " + command + " --help";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      args_out->help = true;
      return OkStatus();
    }
    const bool common = std::find(kCommon.begin(), kCommon.end(), arg) != kCommon.end();
    const bool mine = std::find(own_flags.begin(), own_flags.end(), arg) != own_flags.end();
    if (!common && !mine) return Error{prefix + "unknown argument '" + arg + "'", see};
    if (i + 1 >= args.size()) return Error{prefix + arg + " needs a value", see};
    const std::string& value = args[++i];
    Status ok = common ? ParseCommonFlag(prefix, arg, value, args_out) : own(arg, value);
    if (!ok.ok()) return ok;
  }
  return OkStatus();
}

void WriteAll(int fd, const std::string& text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace gculaunch
