#include "launcher/sys/thread_priority.h"

#include <dirent.h>
#include <sched.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "launcher/sys/safe_files.h"
#include "launcher/sys/status_proc.h"

namespace gculaunch::sys {

namespace {

constexpr int kCapSysNice = 23;  // linux/capability.h

std::string PolicyName(int policy) {
  switch (policy) {
    case SCHED_OTHER:
      return "SCHED_OTHER";
    case SCHED_BATCH:
      return "SCHED_BATCH";
    case SCHED_IDLE:
      return "SCHED_IDLE";
    default:
      return "policy " + std::to_string(policy);
  }
}

// One thread: the policy, then the nice value, then both read back.  ESRCH: the thread exited
// meanwhile, which is no failure.
Status SetThread(pid_t tid, const Priority& priority) {
  const std::string who = "thread " + std::to_string(tid);
  sched_param param{};
  if (::sched_setscheduler(tid, priority.policy, &param) != 0 && errno != ESRCH) {
    return Error{who + ": " + PolicyName(priority.policy) + ": " + std::strerror(errno), ""};
  }
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(tid), priority.nice) != 0 && errno != ESRCH) {
    return Error{who + ": nice " + std::to_string(priority.nice) + ": " + std::strerror(errno), ""};
  }
  const int policy = ::sched_getscheduler(tid);
  if (policy < 0) return OkStatus();  // gone
  errno = 0;
  const int nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
  if (errno == ESRCH) return OkStatus();
  const Priority now{nice, policy & ~SCHED_RESET_ON_FORK};
  if (now != priority) return Error{who + " kept " + Describe(now), ""};
  return OkStatus();
}

}  // namespace

std::string Describe(const Priority& priority) {
  return "nice " + std::to_string(priority.nice) + ", " + PolicyName(priority.policy);
}

Result<std::uint64_t> ParseCapEff(const std::string& status) {
  const std::string field = StatusField(status, "CapEff");
  std::uint64_t caps = 0;
  const char* end = field.data() + field.size();
  const auto [ptr, ec] = std::from_chars(field.data(), end, caps, 16);
  if (field.empty() || ec != std::errc() || ptr != end) {
    return Error{"no hexadecimal CapEff line in the process's status", ""};
  }
  return caps;
}

bool MayRaiseTo(std::uint64_t cap_eff, rlim_t nice_limit, int nice) {
  if ((cap_eff >> kCapSysNice) & 1U) return true;
  if (nice_limit == RLIM_INFINITY) return true;
  // RLIMIT_NICE is a ceiling of 20 - nice (setrlimit(2)): 0 and 1 allow no raise at all.
  return static_cast<long long>(nice_limit) >= 20LL - nice;
}

Result<bool> MayRaiseOwnTo(int nice) {
  auto status = ReadBoundedFile("/proc/self/status", 64 * 1024);
  if (!status.ok()) return status.error();
  auto caps = ParseCapEff(*status);
  if (!caps.ok()) return caps.error();
  rlimit limit{};
  if (::getrlimit(RLIMIT_NICE, &limit) != 0) {
    return Error{std::string("getrlimit(RLIMIT_NICE): ") + std::strerror(errno), ""};
  }
  return MayRaiseTo(*caps, limit.rlim_cur, nice);
}

Result<Priority> OwnPriority() {
  errno = 0;
  const int nice = ::getpriority(PRIO_PROCESS, 0);
  if (errno != 0) return Error{std::string("getpriority: ") + std::strerror(errno), ""};
  const int policy = ::sched_getscheduler(0);
  if (policy < 0) return Error{std::string("sched_getscheduler: ") + std::strerror(errno), ""};
  return Priority{nice, policy & ~SCHED_RESET_ON_FORK};
}

bool IsTimeSharing(int policy) {
  return policy == SCHED_OTHER || policy == SCHED_BATCH || policy == SCHED_IDLE;
}

Status SetEveryThread(pid_t pid, const Priority& priority, const std::string& proc) {
  const std::string dir = proc + "/" + std::to_string(pid) + "/task";
  DIR* tasks = ::opendir(dir.c_str());
  if (tasks == nullptr) return Error{"cannot list " + dir + ": " + std::strerror(errno), ""};
  Status result = OkStatus();
  while (const dirent* entry = ::readdir(tasks)) {
    pid_t tid = 0;
    const char* name = entry->d_name;
    const char* end = name + std::strlen(name);
    const auto [ptr, ec] = std::from_chars(name, end, tid);
    if (ec != std::errc() || ptr != end || tid <= 0) continue;  // "." and ".."
    result = SetThread(tid, priority);
    if (!result.ok()) break;
  }
  ::closedir(tasks);
  return result;
}

}  // namespace gculaunch::sys
