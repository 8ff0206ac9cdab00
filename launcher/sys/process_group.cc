#include "launcher/sys/process_group.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace gculaunch::sys {
namespace {

// Reads a small /proc file into `out`; false when it cannot be read.
bool ReadSmallFile(const std::string& path, std::string* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  out->clear();
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > 8192) break;
  }
  ::close(fd);
  return !out->empty();
}

}  // namespace

bool SignalGroup(pid_t pgid, int sig, int* err) {
  if (pgid <= 1) {
    // Never kill(-1) or kill(0): that would reach every process or our own group.
    if (err != nullptr) *err = EINVAL;
    return false;
  }
  if (::kill(-pgid, sig) == 0) return true;
  if (err != nullptr) *err = errno;
  return false;
}

bool SignalProcess(pid_t pid, int sig) {
  if (pid <= 1) return false;
  return ::kill(pid, sig) == 0;
}

std::string ProcStateName(char state) {
  switch (state) {
    case 'R':
      return "R (running)";
    case 'S':
      return "S (sleeping)";
    case 'D':
      return "D (disk sleep: uninterruptible)";
    case 'Z':
      return "Z (zombie)";
    case 'T':
      return "T (stopped)";
    case 't':
      return "t (tracing stop)";
    case 'X':
      return "X (dead)";
    case 'I':
      return "I (idle)";
    default:
      return std::string(1, state);
  }
}

std::string ProcInfo::Describe() const {
  std::string out = "pid " + std::to_string(pid) + " (" + comm + ") state " + ProcStateName(state);
  if (!wchan.empty() && wchan != "0") out += ", wchan " + wchan;
  return out;
}

bool ReadProcInfo(pid_t pid, ProcInfo* info) {
  const std::string dir = "/proc/" + std::to_string(pid);
  std::string stat;
  if (!ReadSmallFile(dir + "/stat", &stat)) return false;
  // "pid (comm) S ppid pgrp ...": comm may contain spaces and ')', so split at the last ')'.
  const size_t open = stat.find('(');
  const size_t close = stat.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 2 >= stat.size()) {
    return false;
  }
  info->pid = pid;
  info->comm = stat.substr(open + 1, close - open - 1);
  const char* rest = stat.c_str() + close + 2;
  info->state = rest[0];
  char* end = nullptr;
  std::strtol(rest + 1, &end, 10);                              // ppid
  info->pgid = static_cast<pid_t>(std::strtol(end, &end, 10));  // pgrp
  std::string wchan;
  if (ReadSmallFile(dir + "/wchan", &wchan)) {
    while (!wchan.empty() && (wchan.back() == '\n' || wchan.back() == '\0')) wchan.pop_back();
    info->wchan = wchan;
  } else {
    info->wchan.clear();
  }
  return true;
}

std::vector<ProcInfo> GroupMembers(pid_t pgid) {
  std::vector<ProcInfo> members;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return members;
  while (const dirent* entry = ::readdir(dir)) {
    const char* name = entry->d_name;
    if (name[0] < '1' || name[0] > '9') continue;
    char* end = nullptr;
    const long pid = std::strtol(name, &end, 10);
    if (*end != '\0') continue;
    ProcInfo info;
    if (ReadProcInfo(static_cast<pid_t>(pid), &info) && info.pgid == pgid) {
      members.push_back(std::move(info));
    }
  }
  ::closedir(dir);
  return members;
}

bool GroupAlive(pid_t pgid) {
  if (pgid <= 1) return false;
  if (::kill(-pgid, 0) != 0 && errno == ESRCH) return false;
  // Something is in the group; it only counts if it is not a zombie.  Without
  // /proc we cannot tell, so the kernel's answer stands.
  if (::access("/proc/self/stat", R_OK) != 0) return true;
  for (const ProcInfo& member : GroupMembers(pgid)) {
    if (member.state != 'Z' && member.state != 'X') return true;
  }
  return false;
}

}  // namespace gculaunch::sys
