#include "launcher/run/standby_pool.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "base/env_map.h"
#include "base/text.h"
#include "launcher/sys/go_channel.h"
#include "launcher/sys/safe_files.h"

namespace gculaunch {

namespace {

constexpr std::chrono::milliseconds kLingerPoll{100};
constexpr std::chrono::milliseconds kDrainPoll{10};  ///< the same at the end of the run
// How long a standby has, from the go, to read its environment and confirm it.  What it does
// in that time is one read of a few kilobytes, a dictionary update and a 3-byte write: well
// under a millisecond on an idle machine, and its priority was raised before the go, so it
// competes with the new ranks as their equal.  On the 2-core build machine shared with other
// builds (load average 14), the slowest of four standbys with torch imported confirmed 6 to
// 10 ms after its go (GCULAUNCH_LOG_LEVEL=debug logs it for each attempt).  500 ms leaves
// fifty times that for a loaded scheduler or pages the standby must fault back in, and is
// still short beside what a cold start costs (an import of torch: 1-5 s on that machine), so
// a stopped or deaf standby delays only its own rank, by at most that much, before it starts
// cold.  The attempt and its other ranks never wait for it.
constexpr std::chrono::milliseconds kGoBound{500};

// The checks of a standby before its go, on the OffLoop thread (only captured values).
StandbyCheck CheckBeforeGo(pid_t pid, const std::string& ready_file,
                           const std::optional<sys::Priority>& base) {
  StandbyCheck check;
  // The standby writes one line there; as any file a rank can replace, it is read without
  // following a link, only as the job's user's regular file, and no further than one line
  // needs (it goes into a log line).
  sys::RankFileRules rules;
  rules.owner = ::geteuid();
  rules.limit = 4096;
  auto failed = sys::ReadRankFile(ready_file + ".failed", rules);
  if (failed.ok() && !Trim(failed->text).empty()) {
    check.failure = Trim(failed->text);
    return check;
  }
  check.ready = sys::IsRegularFileNoFollow(ready_file);
  if (!check.ready) return check;
  auto status = sys::ReadTaskStatus(pid);
  if (!status.ok()) {
    check.why = "its standby is gone (" + status.error().what + ")";
    return check;
  }
  check.why = WhyCannotGo(*status);
  if (check.why.empty() && base) {
    if (Status raised = sys::SetEveryThread(pid, *base); !raised.ok()) {
      check.why = "its priority could not be raised again (" + raised.error().what + ")";
    }
  }
  return check;
}

// WORLD_SIZE of the launches (the same in each); 0 when absent.
std::int64_t WorldSizeOf(const std::vector<RankLaunch>& launches) {
  if (launches.empty()) return 0;
  const auto value = EnvMap::FromStrings(launches.front().env).Get("WORLD_SIZE");
  if (!value) return 0;
  try {
    return std::stoll(*value);
  } catch (const std::exception&) {  // not a number: no rule to wait for
    return 0;
  }
}

}  // namespace

std::chrono::milliseconds GoConfirmBound() { return kGoBound; }

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
    const std::string key = item.substr(0, item.find('='));
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
  const EnvMap before = EnvMap::FromStrings(standby_for.env);
  const EnvMap now = EnvMap::FromStrings(launch.env);
  const auto& per_attempt = PerAttemptVariables();
  std::vector<std::string> changed;
  for (const EnvMap* side : {&before, &now}) {
    for (const auto& [key, value] : side->vars()) {
      if (std::find(per_attempt.begin(), per_attempt.end(), key) != per_attempt.end()) continue;
      if (before.Get(key) != now.Get(key) &&
          std::find(changed.begin(), changed.end(), key) == changed.end()) {
        changed.push_back(key);
      }
    }
  }
  if (changed.empty()) return "";
  return "its environment changed where a standby cannot follow (" + Join(changed, ", ") + ")";
}

std::string WhyCannotGo(const sys::TaskStatus& status) {
  switch (status.state) {
    case 'T':
      return "its standby is stopped (state T: SIGSTOP or a job-control stop)";
    case 't':
      return "its standby is stopped by a tracer (state t)";
    case 'Z':
    case 'X':
      return "its standby exited";
    default:
      break;
  }
  if (status.tracer != 0) return "its standby is traced by pid " + std::to_string(status.tracer);
  return "";
}

sys::Priority WaitingPriority(const sys::Priority& base, bool lifted) {
  return sys::Priority{base.nice + StandbyPool::kStandbyNice, lifted ? base.policy : SCHED_IDLE};
}

struct StandbyPool::Standby {
  RankLaunch launch;  ///< the launch it was started from (env: the rank's, not its own)
  pid_t pid = 0;
  bool exited = false;
  WorkerExit exit;
  sys::UniqueFd go;  ///< gculaunch's end of its stdin socket
  sys::UniqueFd out;
  sys::UniqueFd err;
  std::string ready_file;
};

// A standby between Take() and the answer of its checks.
struct StandbyPool::Taking {
  std::unique_ptr<Standby> standby;
  sys::GroupTracker* into = nullptr;
  sys::GroupTracker::ExitHandler on_exit;
  TakeDone done;
};

StandbyPool::StandbyPool(boost::asio::io_context& io, sys::Spawner& spawner,
                         sys::ChildWatcher& watcher, sys::Guardian* guardian,
                         StandbySettings settings)
    : io_(io),
      groups_(spawner, watcher, guardian),
      settings_(std::move(settings)),
      linger_timer_(io),
      linger_poll_(kLingerPoll),
      off_(io) {
  // Lower only what can be raised again: gculaunch's own policy must be a time-sharing one
  // (no real-time parameters to restore), nice +10 must exist, and raising it back must be
  // allowed (CapEff, RLIMIT_NICE: read off the loop, like every /proc file here).
  auto own = sys::OwnPriority();
  if (!own.ok() || !sys::IsTimeSharing(own->policy) || own->nice + kStandbyNice > 19) {
    decided_ = true;
    return;
  }
  const sys::Priority base = *own;
  off_.Run<Result<bool>>([nice = base.nice] { return sys::MayRaiseOwnTo(nice); },
                         lifetime_.Wrap([this, base](Result<bool> may) {
                           decided_ = true;
                           if (may.ok() && *may) base_ = base;
                           if (waiting_) {
                             auto [launches, attempt] = std::move(*waiting_);
                             waiting_.reset();
                             Prepare(launches, attempt);
                           }
                         }));
}

StandbyPool::~StandbyPool() { lifetime_.Expire(); }

void StandbyPool::Prepare(const std::vector<RankLaunch>& launches, int restart_count) {
  if (!decided_) {  // the standbys' priority is not known yet: start them once it is
    waiting_.emplace(launches, restart_count);
    return;
  }
  if (restart_count < 0 || restart_count != attempt_) {
    attempt_ = restart_count;
    world_ = WorldSizeOf(launches);
    lifted_ = restart_count < 0;  // no rank runs: nothing to compete with
  }
  if (!lifted_ && connected_attempt_ == attempt_) Lift();
  StartAll(launches);
}

void StandbyPool::StartAll(const std::vector<RankLaunch>& launches) {
  for (const RankLaunch& launch : launches) {
    if (standbys_.count(launch.local_rank) != 0) continue;
    if (launch.inherit_stdin || launch.take_terminal) continue;  // it reads gculaunch's stdin
    if (const std::string why = WhyNoHook(launch.argv); !why.empty()) {
      if (!no_hook_noted_) Note("--warm-ranks: no standby: " + why);
      no_hook_noted_ = true;
      continue;
    }
    Start(launch);
  }
}

void StandbyPool::Start(const RankLaunch& launch) {
  auto fail = [&](const Error& error) {
    Note("local rank " + std::to_string(launch.local_rank) +
         ": no standby (it starts cold): " + error.what);
  };
  auto go = sys::MakeGoSocketPair();
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
  request.stdin_fd = go->second.get();
  request.stdout_fd = out->write.get();
  request.stderr_fd = err->write.get();
  request.cpus = launch.cpus;
  // Set by the child before exec, inherited by every thread the preload starts.
  if (base_) request.priority = WaitingPriority(*base_, lifted_);
  auto pid = groups_.Spawn(
      request, lifetime_.Wrap([this](pid_t child, WorkerExit exit) { OnExit(child, exit); }));
  if (!pid.ok()) return fail(pid.error());
  s->pid = *pid;
  s->go = std::move(go->first);
  s->out = std::move(out->read);
  s->err = std::move(err->read);
  standbys_[launch.local_rank] = std::move(s);
}

// A standby (waiting, or being checked) exited: kept as exited until it is taken or
// dismissed; its group is released once empty.
void StandbyPool::OnExit(pid_t pid, WorkerExit exit) {
  for (auto& [local_rank, s] : standbys_) {
    if (s->pid != pid) continue;
    s->exited = true;
    s->exit = exit;
  }
  for (auto& [id, taking] : taking_) {
    if (taking.standby->pid != pid) continue;
    taking.standby->exited = true;
    taking.standby->exit = exit;
  }
  ScheduleLingerCheck();
}

std::uint64_t StandbyPool::Take(const RankLaunch& launch, sys::GroupTracker& into,
                                sys::GroupTracker::ExitHandler on_exit, TakeDone done) {
  auto it = standbys_.find(launch.local_rank);
  if (it == standbys_.end()) return 0;
  std::unique_ptr<Standby> s = std::move(it->second);
  standbys_.erase(it);  // a new standby may start for the next attempt meanwhile
  std::string why = WhyNotWarm(s->launch, launch);
  if (why.empty() && (launch.inherit_stdin || launch.take_terminal)) {
    why = "it reads gculaunch's stdin";
  }
  const std::uint64_t id = ++take_serial_;
  const pid_t pid = s->pid;
  const std::string ready_file = s->ready_file;
  taking_[id] = Taking{std::move(s), &into, std::move(on_exit), std::move(done)};
  auto resolve =
      lifetime_.Wrap([this, id, why](const StandbyCheck& check) { Resolve(id, why, check); });
  if (!why.empty()) {
    off_.Run<StandbyCheck>([] { return StandbyCheck{}; },
                           std::move(resolve));  // in order, never inline
  } else {
    off_.Run<StandbyCheck>(
        [pid, ready_file, base = base_] { return CheckBeforeGo(pid, ready_file, base); },
        std::move(resolve));
  }
  return id;
}

// The checks are done: the standby goes to the attempt, or is dismissed with one line.
void StandbyPool::Resolve(std::uint64_t id, const std::string& why_now, const StandbyCheck& check) {
  auto it = taking_.find(id);
  if (it == taking_.end()) return;  // cancelled
  Taking taking = std::move(it->second);
  taking_.erase(it);
  Standby& s = *taking.standby;
  std::string why = why_now;
  if (why.empty()) why = check.failure;
  if (why.empty() && (!check.ready || s.exited)) why = ExitedWhy(s);
  if (why.empty()) why = check.why;
  if (!why.empty()) {
    NoteDismissed(s.launch.local_rank, s.pid, why, true);
    Dismiss(std::move(taking.standby));
    taking.done(std::nullopt);
    return;
  }
  groups_.HandOver(s.pid, *taking.into, std::move(taking.on_exit));
  samples_.erase(s.pid);
  ::unlink(s.ready_file.c_str());
  AdoptedStandby adopted;
  adopted.pid = s.pid;
  adopted.go = std::move(s.go);
  adopted.out = std::move(s.out);
  adopted.err = std::move(s.err);
  taking.done(std::move(adopted));
}

std::string StandbyPool::ExitedWhy(const Standby& s) const {
  if (s.exited) return "its standby exited before the attempt (" + s.exit.Describe() + ")";
  return "its standby was not ready (still importing " + Join(settings_.preload, ", ") + ")";
}

void StandbyPool::Cancel(std::uint64_t id) {
  auto it = taking_.find(id);
  if (it == taking_.end()) return;
  std::unique_ptr<Standby> s = std::move(it->second.standby);
  taking_.erase(it);
  Dismiss(std::move(s));
}

void StandbyPool::RanksConnected(int restart_count, std::int64_t connected) {
  if (restart_count != attempt_ || connected < world_) return;
  connected_attempt_ = restart_count;
  if (!lifted_) Lift();
}

// The attempt's ranks are past their imports: the standbys may have the CPU time their nice
// value gives them.  Standbys being taken are raised to the ranks' priority anyway.
void StandbyPool::Lift() {
  lifted_ = true;
  if (!base_) return;
  for (const auto& [local_rank, s] : standbys_) {
    if (s->exited) continue;
    off_.Run<gculaunch::Status>(
        [pid = s->pid, p = WaitingPriority(*base_, true)] { return sys::SetEveryThread(pid, p); },
        [](const gculaunch::Status&) {});  // one that stays SCHED_IDLE only imports later
  }
}

void StandbyPool::NoteDismissed(int local_rank, pid_t pid, const std::string& why,
                                bool cold_start) const {
  Note("local rank " + std::to_string(local_rank) +
       (cold_start ? " starts cold: " : " does not start (the attempt is stopping): ") + why +
       "; its standby (pid " + std::to_string(pid) + ") was dismissed");
}

void StandbyPool::Note(const std::string& line) const {
  if (note_) note_(line);
}

void StandbyPool::DismissAll() {
  waiting_.reset();  // a Prepare() that waited for the priority decision: no standby now
  while (!standbys_.empty()) {
    auto s = std::move(standbys_.begin()->second);
    standbys_.erase(standbys_.begin());
    Dismiss(std::move(s));
  }
}

// The run is over.  The exits of the dismissed standbys and the looks at their groups are
// events of the io_context, so it runs until they are all released or `bound` passed.
bool StandbyPool::Drain(std::chrono::milliseconds bound) {
  linger_poll_ = kDrainPoll;  // nothing else happens now: look more often
  linger_armed_ = false;      // re-armed at the shorter interval (the old wait is replaced)
  DismissAll();
  while (!taking_.empty()) Cancel(taking_.begin()->first);  // their attempt is over too
  if (groups_.held() > 0) ScheduleLingerCheck();
  const auto deadline = std::chrono::steady_clock::now() + bound;
  io_.restart();
  while (groups_.held() > 0 && io_.run_one_until(deadline) > 0) {
  }
  return groups_.held() == 0;
}

// Kills the standby's group; its zombie (once it exited) pins the group's number until the
// group is empty, then it is released.  Closing its stdin socket without a go would also
// tell it to exit.
void StandbyPool::Dismiss(std::unique_ptr<Standby> s) {
  groups_.Abandon(s->pid);
  samples_.erase(s->pid);
  ::unlink(s->ready_file.c_str());
  ::unlink((s->ready_file + ".failed").c_str());
  ScheduleLingerCheck();
}

// Dismissed standbys are looked at until their groups are released; so are standbys that
// exited by themselves (their zombies wait for an empty group too).
void StandbyPool::ScheduleLingerCheck() {
  if (linger_armed_) return;
  linger_armed_ = true;
  linger_timer_.expires_after(linger_poll_);
  linger_timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
    linger_armed_ = false;
    if (ec) return;
    // A job on the OffLoop thread may still name one of these pids (raise its priority):
    // until it is done, the zombie keeps the number from going to another process.
    if (off_.pending() == 0) {
      (void)groups_.ReleaseEmpty();  // /proc unreadable: nothing released, looked at again
    }
    bool left = groups_.abandoned() > 0;
    for (pid_t pid : groups_.Held()) left = left || groups_.Exited(pid);
    if (left) ScheduleLingerCheck();
  }));
}

std::vector<StandbyStatus> StandbyPool::Status() const {
  std::vector<StandbyStatus> out;
  for (const auto& [local_rank, s] : standbys_) {
    if (s->exited) continue;
    auto it = samples_.find(s->pid);
    const Sample sample = it != samples_.end() ? it->second : Sample{};
    out.push_back({local_rank, s->pid, sample.ready, sample.pss_bytes});
  }
  RefreshSamples();
  return out;
}

// A new look at every waiting standby, off the loop: its ready file and its PSS (reading
// smaps_rollup waits on the standby's memory map lock).
void StandbyPool::RefreshSamples() const {
  if (sampling_ || standbys_.empty()) return;
  std::vector<std::pair<pid_t, std::string>> asked;
  for (const auto& [local_rank, s] : standbys_) {
    if (!s->exited) asked.emplace_back(s->pid, s->ready_file);
  }
  sampling_ = true;
  using Samples = std::vector<std::pair<pid_t, Sample>>;
  off_.Run<Samples>(
      [asked] {
        Samples samples;
        for (const auto& [pid, ready_file] : asked) {
          samples.emplace_back(
              pid, Sample{sys::IsRegularFileNoFollow(ready_file), sys::ReadPssBytes(pid)});
        }
        return samples;
      },
      lifetime_.Wrap([this](const Samples& samples) {
        sampling_ = false;
        for (const auto& [pid, sample] : samples) samples_[pid] = sample;
      }));
}

}  // namespace gculaunch
