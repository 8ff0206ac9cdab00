#include "launcher/run/standby_pool.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <utility>

#include "base/text.h"
#include "launcher/sys/process_group.h"
#include "launcher/sys/safe_files.h"
#include "launcher/sys/status_proc.h"

namespace gculaunch {

namespace {

constexpr std::chrono::milliseconds kLingerPoll{100};
constexpr std::chrono::milliseconds kGoBound{2000};  ///< the go message's write

std::string KeyOf(const std::string& item) { return item.substr(0, item.find('=')); }

std::map<std::string, std::string> AsMap(const std::vector<std::string>& env) {
  std::map<std::string, std::string> out;
  for (const std::string& item : env) {
    const size_t eq = item.find('=');
    out[item.substr(0, eq)] = eq == std::string::npos ? "" : item.substr(eq + 1);
  }
  return out;
}

// Writes all of `data` to the standby's stdin pipe, waiting at most `bound` for it to read
// (an environment larger than the pipe's buffer); false on an error (the standby died) or
// when it does not read in time (stopped): the event loop never waits longer than that.
bool WriteAll(int fd, const std::string& data, std::chrono::milliseconds bound) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + bound;
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || errno != EAGAIN) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLOUT, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
  }
  return true;
}

// Whether this process may set a nice value of `nice` again after raising it (lowering the
// priority is always allowed; raising it back needs CAP_SYS_NICE, or RLIMIT_NICE).
bool MayRaisePriorityTo(int nice) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    const unsigned long long caps = std::stoull(line.substr(7), nullptr, 16);
    if ((caps >> 23) & 1ULL) return true;  // CAP_SYS_NICE
  }
  rlimit limit{};
  if (::getrlimit(RLIMIT_NICE, &limit) != 0) return false;
  const long long lowest = 20 - static_cast<long long>(limit.rlim_cur);
  return limit.rlim_cur == RLIM_INFINITY || nice >= lowest;
}

// Every thread of `pid` back at `nice`; false when one could not be set (or read back).
bool RaiseEveryThread(pid_t pid, int nice) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* tasks = ::opendir(dir.c_str());
  if (tasks == nullptr) return false;
  bool all = true;
  while (const dirent* entry = ::readdir(tasks)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    const auto tid = static_cast<id_t>(std::stoul(entry->d_name));
    errno = 0;
    if (::setpriority(PRIO_PROCESS, tid, nice) != 0 && errno != ESRCH) all = false;
    errno = 0;
    const int now = ::getpriority(PRIO_PROCESS, tid);
    if (errno == 0 && now != nice) all = false;
  }
  ::closedir(tasks);
  return all;
}

}  // namespace

std::string WhyNoHook(const std::vector<std::string>& argv) {
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-' || arg == "-m" || arg == "-c" || arg[1] == '-') break;
    for (char flag : {'E', 'I', 'S'}) {
      if (arg.find(flag) != std::string::npos) {
        return std::string("the interpreter runs with -") + flag +
               ", which keeps gculaunch's hook from loading";
      }
    }
  }
  return "";
}

const std::vector<std::string>& PerAttemptVariables() {
  static const std::vector<std::string> kVars = {"RANK",
                                                 "GROUP_RANK",
                                                 "ROLE_RANK",
                                                 "WORLD_SIZE",
                                                 "GROUP_WORLD_SIZE",
                                                 "ROLE_WORLD_SIZE",
                                                 "MASTER_ADDR",
                                                 "MASTER_PORT",
                                                 "TORCHELASTIC_RESTART_COUNT",
                                                 "TORCHELASTIC_RUN_ID",
                                                 "TORCHELASTIC_ERROR_FILE",
                                                 "GCULAUNCH_STACKS_FILE",
                                                 "GCULAUNCH_HEARTBEAT_FILE"};
  return kVars;
}

std::vector<std::string> StandbyEnvironment(const std::vector<std::string>& rank_env,
                                            const StandbySettings& settings,
                                            const std::string& ready_file) {
  const auto& per_attempt = PerAttemptVariables();
  std::vector<std::string> env;
  std::string pythonpath = settings.hook_dir;
  for (const std::string& item : rank_env) {
    const std::string key = KeyOf(item);
    if (std::find(per_attempt.begin(), per_attempt.end(), key) != per_attempt.end()) continue;
    if (key == "PYTHONPATH") {
      pythonpath += ":" + item.substr(key.size() + 1);
      continue;
    }
    env.push_back(item);
  }
  env.push_back("PYTHONPATH=" + pythonpath);
  env.push_back("GCULAUNCH_STANDBY_PARENT=" + settings.parent_pid);
  env.push_back("GCULAUNCH_STANDBY_DIR=" + settings.hook_dir);
  env.push_back("GCULAUNCH_STANDBY_PRELOAD=" + Join(settings.preload, ","));
  env.push_back("GCULAUNCH_STANDBY_READY=" + ready_file);
  return env;
}

std::string WhyNotWarm(const RankLaunch& standby_for, const RankLaunch& launch) {
  if (launch.program != standby_for.program || launch.argv != standby_for.argv) {
    return "its command line changed";
  }
  if (launch.cpus != standby_for.cpus) return "its CPUs changed";
  const auto before = AsMap(standby_for.env);
  const auto now = AsMap(launch.env);
  const auto& per_attempt = PerAttemptVariables();
  std::vector<std::string> changed;
  for (const auto* side : {&before, &now}) {
    for (const auto& [key, value] : *side) {
      if (std::find(per_attempt.begin(), per_attempt.end(), key) != per_attempt.end()) continue;
      auto a = before.find(key);
      auto b = now.find(key);
      const bool same = a != before.end() && b != now.end() && a->second == b->second;
      if (!same && std::find(changed.begin(), changed.end(), key) == changed.end()) {
        changed.push_back(key);
      }
    }
  }
  if (changed.empty()) return "";
  return "its environment changed where a standby cannot follow (" + Join(changed, ", ") + ")";
}

struct StandbyPool::Standby {
  RankLaunch launch;  ///< the launch it was started from (env: the rank's, not its own)
  pid_t pid = 0;
  bool exited = false;
  WorkerExit exit;
  sys::UniqueFd go;  ///< write end of its stdin pipe
  sys::UniqueFd out;
  sys::UniqueFd err;
  std::string ready_file;
  /// Where its exit goes: the pool's handler until it is taken, then the attempt's.
  std::shared_ptr<sys::ChildWatcher::ExitHandler> on_exit;
};

StandbyPool::StandbyPool(boost::asio::io_context& io, sys::Spawner& spawner,
                         sys::ChildWatcher& watcher, sys::Guardian* guardian,
                         StandbySettings settings)
    : io_(io),
      spawner_(spawner),
      watcher_(watcher),
      guardian_(guardian),
      settings_(std::move(settings)),
      linger_timer_(io) {
  errno = 0;
  const int nice = ::getpriority(PRIO_PROCESS, 0);
  if (errno == 0 && nice + kStandbyNice <= 19 && MayRaisePriorityTo(nice)) base_nice_ = nice;
}

StandbyPool::~StandbyPool() { lifetime_.Expire(); }

void StandbyPool::Prepare(const std::vector<RankLaunch>& launches) {
  for (const RankLaunch& launch : launches) {
    if (standbys_.count(launch.local_rank) != 0) continue;
    if (launch.inherit_stdin || launch.take_terminal) continue;  // it reads gculaunch's stdin
    if (const std::string why = WhyNoHook(launch.argv); !why.empty()) {
      if (note_ && !no_hook_noted_) note_("--warm-ranks: no standby: " + why);
      no_hook_noted_ = true;
      continue;
    }
    Start(launch);
  }
}

StandbyPool::Standby* StandbyPool::Start(const RankLaunch& launch) {
  auto fail = [&](const Error& error) -> Standby* {
    if (note_) {
      note_("local rank " + std::to_string(launch.local_rank) +
            ": no standby (it starts cold): " + error.what);
    }
    return nullptr;
  };
  auto go = sys::MakePipe("standby stdin");
  if (!go.ok()) return fail(go.error());
  auto out = sys::MakePipe("standby stdout");
  if (!out.ok()) return fail(out.error());
  auto err = sys::MakePipe("standby stderr");
  if (!err.ok()) return fail(err.error());
  auto s = std::make_unique<Standby>();
  s->launch = launch;
  s->ready_file = settings_.ready_dir + "/standby-" + std::to_string(launch.local_rank) + "-" +
                  std::to_string(++serial_);
  ::unlink(s->ready_file.c_str());
  ::unlink((s->ready_file + ".failed").c_str());
  sys::SpawnRequest request;
  request.program = launch.program;
  request.argv = launch.argv;
  request.env = StandbyEnvironment(launch.env, settings_, s->ready_file);
  request.stdin_fd = go->read.get();
  request.stdout_fd = out->write.get();
  request.stderr_fd = err->write.get();
  request.cpus = launch.cpus;
  auto pid = spawner_.Spawn(request);
  if (!pid.ok()) return fail(pid.error());
  s->pid = *pid;
  // Idle work at low priority while the ranks train; raised again before the go.  The
  // threads the preload starts inherit it.
  if (base_nice_) ::setpriority(PRIO_PROCESS, static_cast<id_t>(*pid), *base_nice_ + kStandbyNice);
  s->go = std::move(go->write);
  s->out = std::move(out->read);
  s->err = std::move(err->read);
  if (guardian_ != nullptr) guardian_->GroupStarted(*pid, sys::ProcessStartTime(*pid));
  Standby* raw = s.get();
  raw->on_exit = std::make_shared<sys::ChildWatcher::ExitHandler>(
      lifetime_.Wrap([this](pid_t child, WorkerExit exit) { OnExit(child, exit); }));
  watcher_.Watch(*pid, [handler = raw->on_exit](pid_t child, WorkerExit exit) {
    if (*handler) (*handler)(child, exit);
  });
  standbys_[launch.local_rank] = std::move(s);
  return raw;
}

// A standby (waiting, or dismissed) exited: kept as exited until it is taken or dismissed.
void StandbyPool::OnExit(pid_t pid, WorkerExit exit) {
  for (auto& [local_rank, s] : standbys_) {
    if (s->pid != pid) continue;
    s->exited = true;
    s->exit = exit;
  }
  if (auto it = lingering_.find(pid); it != lingering_.end()) it->second = true;
  CheckLingering();
}

bool StandbyPool::IsReady(const Standby& s) const {
  struct stat st {};
  return !s.exited && ::lstat(s.ready_file.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

size_t StandbyPool::ready() const {
  return static_cast<size_t>(std::count_if(standbys_.begin(), standbys_.end(),
                                           [this](const auto& s) { return IsReady(*s.second); }));
}

std::vector<StandbyStatus> StandbyPool::Status() const {
  std::vector<StandbyStatus> out;
  for (const auto& [local_rank, s] : standbys_) {
    if (s->exited) continue;
    out.push_back({local_rank, s->pid, IsReady(*s), sys::ReadPssBytes(s->pid)});
  }
  return out;
}

std::string StandbyPool::FailureOf(const Standby& s) const {
  // The standby writes one line there; as any file a rank can replace, it is read without
  // following a link, only as the job's user's regular file, and no further than one line
  // needs (it goes into a log line).
  sys::RankFileRules rules;
  rules.owner = ::geteuid();
  rules.limit = 4096;
  auto failed = sys::ReadRankFile(s.ready_file + ".failed", rules);
  if (failed.ok() && !Trim(failed->text).empty()) return Trim(failed->text);
  if (s.exited) return "its standby exited before the attempt (" + s.exit.Describe() + ")";
  return "its standby was not ready (still importing " + Join(settings_.preload, ", ") + ")";
}

std::optional<AdoptedStandby> StandbyPool::Take(const RankLaunch& launch) {
  auto it = standbys_.find(launch.local_rank);
  if (it == standbys_.end()) return std::nullopt;
  Standby& s = *it->second;
  std::string why = WhyNotWarm(s.launch, launch);
  if (why.empty() && (launch.inherit_stdin || launch.take_terminal)) {
    why = "it reads gculaunch's stdin";
  }
  if (why.empty() && !IsReady(s)) why = FailureOf(s);
  if (why.empty() && base_nice_ && !RaiseEveryThread(s.pid, *base_nice_)) {
    why = "its priority could not be raised again";  // never a rank at low priority
  }
  std::string message;
  for (const std::string& item : launch.env) message += item + '\0';
  if (why.empty() && !WriteAll(s.go.get(), message, kGoBound))
    why = "its standby could not be told to go";
  if (!why.empty()) {
    if (note_) note_("local rank " + std::to_string(launch.local_rank) + " starts cold: " + why);
    Dismiss(launch.local_rank);
    return std::nullopt;
  }
  s.go.Reset();  // end of file: the hook sets the environment and returns
  AdoptedStandby adopted;
  adopted.pid = s.pid;
  adopted.out = std::move(s.out);
  adopted.err = std::move(s.err);
  adopted.on_exit = s.on_exit;
  *adopted.on_exit = nullptr;  // the attempt sets its own
  ::unlink(s.ready_file.c_str());
  standbys_.erase(it);
  return adopted;
}

void StandbyPool::DismissAll() {
  while (!standbys_.empty()) Dismiss(standbys_.begin()->first);
}

// The run is over: nothing else may run on the io_context.  Each group is polled until no
// member but the zombie leader is left (which the process's exit leaves to init).
bool StandbyPool::Drain(std::chrono::milliseconds bound) {
  DismissAll();
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (!lingering_.empty()) {
    for (auto it = lingering_.begin(); it != lingering_.end();) {
      if (sys::GroupAlive(it->first)) {
        sys::SignalGroup(it->first, SIGKILL);
        ++it;
        continue;
      }
      if (guardian_ != nullptr) guardian_->GroupGone(it->first);
      it = lingering_.erase(it);
    }
    if (lingering_.empty() || std::chrono::steady_clock::now() >= deadline) break;
    ::usleep(10000);
  }
  return lingering_.empty();
}

// Kills the standby's group; its zombie (if it exited) pins the group's number until the
// group is empty, then it is released.
void StandbyPool::Dismiss(int local_rank) {
  auto it = standbys_.find(local_rank);
  if (it == standbys_.end()) return;
  Standby& s = *it->second;
  sys::SignalGroup(s.pid, SIGKILL);
  ::unlink(s.ready_file.c_str());
  ::unlink((s.ready_file + ".failed").c_str());
  lingering_[s.pid] = s.exited;
  standbys_.erase(it);
  CheckLingering();
}

void StandbyPool::CheckLingering() {
  for (auto it = lingering_.begin(); it != lingering_.end();) {
    const pid_t pid = it->first;
    if (!it->second || sys::GroupAlive(pid)) {
      if (it->second) sys::SignalGroup(pid, SIGKILL);  // a child it left
      ++it;
      continue;
    }
    watcher_.Release(pid);
    if (guardian_ != nullptr) guardian_->GroupGone(pid);
    it = lingering_.erase(it);
  }
  if (lingering_.empty()) return;
  linger_timer_.expires_after(kLingerPoll);
  linger_timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
    if (!ec) CheckLingering();
  }));
}

}  // namespace gculaunch
