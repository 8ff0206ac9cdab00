#include "launcher/sys/process_group.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "launcher/sys/unique_fd.h"

namespace gculaunch::sys {
namespace {

// Reads a small /proc file into `out`.  Returns 0, or the errno of the failure (ENOENT and
// ESRCH: the process is gone; EMFILE: no descriptor left).  An empty file is ENOENT.
int ReadSmallFile(const std::string& path, std::string* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buf[1024];
  out->clear();
  int err = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) err = errno;
    if (n <= 0) break;
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > 8192) break;
  }
  ::close(fd);
  if (err == 0 && out->empty()) err = ENOENT;
  return err;
}

// The fields of /proc/<pid>/stat that gculaunch uses.
struct StatFields {
  std::string comm;
  char state = '?';
  pid_t pgid = 0;
  unsigned long long start_time = 0;
};

// "pid (comm) S ppid pgrp ... starttime ...": comm may hold spaces and ')', so the fields
// are counted from the last ')'.  Returns 0 or an errno (EINVAL: unreadable text).
int ReadStat(pid_t pid, StatFields* fields) {
  std::string stat;
  if (const int err = ReadSmallFile("/proc/" + std::to_string(pid) + "/stat", &stat); err != 0) {
    return err;
  }
  const size_t open = stat.find('(');
  const size_t close = stat.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 2 >= stat.size()) {
    return EINVAL;
  }
  fields->comm = stat.substr(open + 1, close - open - 1);
  const char* p = stat.c_str() + close + 2;
  fields->state = *p;
  char* end = nullptr;
  std::strtol(p + 1, &end, 10);                                   // 4: ppid
  fields->pgid = static_cast<pid_t>(std::strtol(end, &end, 10));  // 5: pgrp
  for (int field = 6; field < 22; ++field) std::strtoll(end, &end, 10);
  fields->start_time = std::strtoull(end, &end, 10);  // 22: starttime
  return 0;
}

bool IsFdShortage(int err) { return err == EMFILE || err == ENFILE; }

// The descriptors ReserveDescriptors keeps; released while a scan needs them.
std::vector<int>& Reserve() {
  static std::vector<int> fds;
  return fds;
}
int& ReserveWanted() {
  static int wanted = 0;
  return wanted;
}

void FillReserve() {
  std::vector<int>& fds = Reserve();
  while (static_cast<int>(fds.size()) < ReserveWanted()) {
    const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;  // tried again after the next scan
    fds.push_back(fd);
  }
  while (static_cast<int>(fds.size()) > ReserveWanted()) {
    ::close(fds.back());
    fds.pop_back();
  }
}

void ReleaseReserve() {
  for (int fd : Reserve()) ::close(fd);
  Reserve().clear();
}

// One pass over /proc: calls `visit(pid)` for every process.  Returns 0 or the errno that
// stopped the pass (`visit` may stop it too by returning an errno).
template <typename Visit>
int ScanProc(Visit visit) {
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return errno;
  int err = 0;
  for (;;) {
    errno = 0;
    const dirent* entry = ::readdir(dir);
    if (entry == nullptr) {
      err = errno;
      break;
    }
    const char* name = entry->d_name;
    if (name[0] < '1' || name[0] > '9') continue;
    char* end = nullptr;
    const long pid = std::strtol(name, &end, 10);
    if (*end != '\0') continue;
    err = visit(static_cast<pid_t>(pid));
    if (err != 0) break;
  }
  ::closedir(dir);
  return err;
}

// ScanProc, retried once with the descriptor reserve released when it ran out of descriptors.
template <typename Visit>
int ScanProcWithReserve(Visit visit) {
  int err = ScanProc(visit);
  if (IsFdShortage(err) && !Reserve().empty()) {
    ReleaseReserve();
    err = ScanProc(visit);
    FillReserve();
  }
  return err;
}

// A /proc file that vanished (the process exited) is not a failure of the scan.
bool ProcessGone(int err) { return err == ENOENT || err == ESRCH; }

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
  StatFields fields;
  if (pid <= 0 || ReadStat(pid, &fields) != 0) return false;
  info->pid = pid;
  info->comm = std::move(fields.comm);
  info->state = fields.state;
  info->pgid = fields.pgid;
  std::string wchan;
  if (ReadSmallFile("/proc/" + std::to_string(pid) + "/wchan", &wchan) == 0) {
    while (!wchan.empty() && (wchan.back() == '\n' || wchan.back() == '\0')) wchan.pop_back();
    info->wchan = wchan;
  } else {
    info->wchan.clear();
  }
  return true;
}

unsigned long long ProcessStartTime(pid_t pid) {
  StatFields fields;
  if (pid <= 0 || ReadStat(pid, &fields) != 0) return 0;
  return fields.start_time;
}

std::vector<ProcInfo> GroupMembers(pid_t pgid, int* scan_error) {
  std::vector<ProcInfo> members;
  const int err = ScanProcWithReserve([&](pid_t pid) {
    StatFields fields;
    const int stat_err = ReadStat(pid, &fields);
    if (stat_err != 0) return ProcessGone(stat_err) || stat_err == EINVAL ? 0 : stat_err;
    if (fields.pgid != pgid) return 0;
    ProcInfo info;
    if (ReadProcInfo(pid, &info)) members.push_back(std::move(info));
    return 0;
  });
  if (scan_error != nullptr) *scan_error = err;
  return members;
}

Result<std::set<pid_t>> LiveGroups(const std::set<pid_t>& pgids) {
  std::set<pid_t> asked;
  for (pid_t pgid : pgids) {
    // kill(-pgid, 0) finds zombies too, but ESRCH proves the group has no member at all.
    if (pgid > 1 && !(::kill(-pgid, 0) != 0 && errno == ESRCH)) asked.insert(pgid);
  }
  std::set<pid_t> live;
  if (asked.empty()) return live;
  const int err = ScanProcWithReserve([&](pid_t pid) {
    StatFields fields;
    const int stat_err = ReadStat(pid, &fields);
    if (stat_err != 0) return ProcessGone(stat_err) || stat_err == EINVAL ? 0 : stat_err;
    if (fields.state != 'Z' && fields.state != 'X' && asked.count(fields.pgid) != 0) {
      live.insert(fields.pgid);
    }
    return 0;
  });
  if (err != 0) {
    return SysError("cannot scan /proc for the ranks' processes", err,
                    IsFdShortage(err) ? "raise the open-file limit (ulimit -n)" : "");
  }
  return live;
}

bool GroupAliveForTest(pid_t pgid) {
  if (pgid <= 1) return false;
  auto live = LiveGroups({pgid});
  return !live.ok() || live->count(pgid) != 0;
}

void ReserveDescriptors(int count) {
  ReserveWanted() = count < 0 ? 0 : count;
  FillReserve();
}

}  // namespace gculaunch::sys
