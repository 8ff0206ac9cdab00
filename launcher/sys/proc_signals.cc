#include "launcher/sys/proc_signals.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace gculaunch::sys {

std::optional<unsigned long long> ParseStatusMask(std::string_view status, std::string_view field) {
  size_t at = 0;
  while (at < status.size()) {
    size_t end = status.find('\n', at);
    if (end == std::string_view::npos) end = status.size();
    const std::string_view line = status.substr(at, end - at);
    at = end + 1;
    // The whole field name and its colon: "SigCgt" must not match a line "SigCgtX:".
    if (line.size() <= field.size() || line.substr(0, field.size()) != field ||
        line[field.size()] != ':') {
      continue;
    }
    std::string_view value = line.substr(field.size() + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
      value.remove_prefix(1);
    }
    // 64 signals are 16 hex digits; a longer value would overflow the mask, so it is not read
    // as a mask at all (no partial answer about a signal).
    if (value.empty() || value.size() > 16) return std::nullopt;
    unsigned long long mask = 0;
    for (const char c : value) {
      int digit = 0;
      if (c >= '0' && c <= '9') {
        digit = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        digit = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        digit = c - 'A' + 10;
      } else {
        return std::nullopt;
      }
      mask = (mask << 4U) | static_cast<unsigned long long>(digit);
    }
    return mask;
  }
  return std::nullopt;
}

bool MaskHas(unsigned long long mask, int sig) {
  // Bit 0 is signal 1: the kernel prints sigset_t's first word, where signal n is bit n-1.
  return ((mask >> static_cast<unsigned>(sig - 1)) & 1ULL) != 0;
}

Result<bool> CatchesSignal(pid_t pid, int sig) {
  const std::string path = "/proc/" + std::to_string(pid) + "/status";
  // The whole text goes to ParseStatusMask, which stays pure so that tests feed it made-up
  // status files.
  std::ifstream file(path);
  if (!file) {
    const int err = errno;
    return Error{"cannot read " + path + ": " + std::strerror(err),
                 err == ENOENT ? "the process has exited" : "check that /proc is mounted"};
  }
  std::stringstream text;
  text << file.rdbuf();
  const auto mask = ParseStatusMask(text.str(), "SigCgt");
  if (!mask) {
    return Error{path + " has no readable SigCgt line", "check that /proc is a Linux procfs"};
  }
  return MaskHas(*mask, sig);
}

}  // namespace gculaunch::sys
