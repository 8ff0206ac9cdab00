#include "launcher/sys/command_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <utility>

#include "launcher/sys/process_group.h"
#include "launcher/sys/spawner.h"
#include "launcher/sys/unique_fd.h"

namespace gculaunch {
namespace {

using Clock = std::chrono::steady_clock;

CommandOutcome SpawnFailed(std::string reason) {
  CommandOutcome outcome;
  outcome.kind = CommandOutcome::Kind::kSpawnFailed;
  outcome.error = std::move(reason);
  return outcome;
}

void Append(std::string& buffer, const char* data, size_t size) {
  const size_t room =
      CommandOutcome::kMaxOutput - std::min(buffer.size(), CommandOutcome::kMaxOutput);
  buffer.append(data, std::min(size, room));
}

long long MillisLeft(Clock::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
}

// While it lives, SIGCHLD is not ignored and has no SA_NOCLDWAIT: with either, the kernel
// reaps the child itself and its exit status is lost (waitpid() fails with ECHILD).  The
// previous disposition comes back when it is destroyed.  `gculaunch check` inherits
// whatever its parent set; a launch resets SIGCHLD for good (sys::DefaultSigchld).
class SigchldNotIgnored {
 public:
  SigchldNotIgnored() = default;
  SigchldNotIgnored(const SigchldNotIgnored&) = delete;
  SigchldNotIgnored& operator=(const SigchldNotIgnored&) = delete;
  ~SigchldNotIgnored() {
    // Cannot fail: SIGCHLD is a valid signal and `saved_` came from sigaction() itself.
    if (changed_) ::sigaction(SIGCHLD, &saved_, nullptr);
  }

  /// Returns "" or why the disposition could not be read or changed.
  std::string Apply() {
    if (::sigaction(SIGCHLD, nullptr, &saved_) != 0) {
      return std::string("sigaction(SIGCHLD): ") + std::strerror(errno);
    }
    if (saved_.sa_handler != SIG_IGN && (saved_.sa_flags & SA_NOCLDWAIT) == 0) return "";
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    if (::sigaction(SIGCHLD, &dfl, nullptr) != 0) {
      return std::string("sigaction(SIGCHLD): ") + std::strerror(errno);
    }
    changed_ = true;
    return "";
  }

 private:
  struct sigaction saved_ {};
  bool changed_ = false;
};

// Reads both pipes into `outcome` until both are at EOF or the deadline passes.  Returns
// false at the deadline (or when poll() itself fails: waiting on is impossible, which is
// handled like a hang).
bool ReadUntilEof(sys::UniqueFd& out, sys::UniqueFd& err, Clock::time_point deadline,
                  CommandOutcome& outcome) {
  char buffer[65536];
  while (out.valid() || err.valid()) {
    const long long left = MillisLeft(deadline);
    if (left <= 0) return false;
    // poll() ignores entries whose fd is negative: a closed stream drops out by itself.
    pollfd polls[2] = {{out.get(), POLLIN, 0}, {err.get(), POLLIN, 0}};
    const int ready = ::poll(polls, 2, static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (ready < 0) {
      if (errno == EINTR) continue;
      outcome.error = std::string("poll: ") + std::strerror(errno);
      return false;
    }
    sys::UniqueFd* fds[2] = {&out, &err};
    std::string* sinks[2] = {&outcome.out, &outcome.err};
    for (int i = 0; i < 2; ++i) {
      if (!fds[i]->valid() || polls[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i]->get(), buffer, sizeof(buffer));
      if (n > 0) {
        Append(*sinks[i], buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        // EOF, or a read error (EIO): nothing more will come from this stream.
        fds[i]->Reset();
      }
    }
  }
  return true;
}

enum class Wait {
  kExited,    ///< exited (a zombie now, not reaped)
  kDeadline,  ///< still running at the deadline (or waiting failed: handled like a hang)
  kLost,      ///< not our child any more: someone else reaped it
};

// Waits, without reaping, until `pid` has exited or the deadline passes.  The zombie keeps
// the pid, and with it the number of its process group, allocated, so the group can still
// be signalled safely afterwards.  Short polls, not a pidfd: the probe must also work on
// the older kernels of training images.  `error` says why when waiting failed.
Wait WaitForExit(pid_t pid, Clock::time_point deadline, std::string& error) {
  for (;;) {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      error = "pid " + std::to_string(pid) +
              " was reaped elsewhere (waitid: " + std::strerror(errno) + ")";
      return Wait::kLost;
    }
    if (info.si_pid == pid) return Wait::kExited;
    const long long left = MillisLeft(deadline);
    if (left <= 0) return Wait::kDeadline;
    // A poll() with no descriptors is a sleep; EINTR only cuts it short.
    if (::poll(nullptr, 0, static_cast<int>(std::min<long long>(left, 20))) < 0 && errno != EINTR) {
      error = std::string("poll: ") + std::strerror(errno);
      return Wait::kDeadline;
    }
  }
}

// SIGKILL to the whole group of `pid` (which leads it and is not reaped yet, so the number
// is still its own).  Returns "" or why the group could not be signalled.  ESRCH cannot
// happen while the leader is unreaped; it is accepted all the same.
std::string KillGroup(pid_t pid) {
  int err = 0;
  if (sys::SignalGroup(pid, SIGKILL, &err) || err == ESRCH) return "";
  return "cannot kill process group " + std::to_string(pid) + ": " + std::strerror(err);
}

// Reaps `pid`, blocking.  Returns its wait status, or nullopt (and `error`) when waitpid()
// fails, which only happens when someone else reaped it.
std::optional<int> Reap(pid_t pid, std::string& error) {
  int status = 0;
  for (;;) {
    if (::waitpid(pid, &status, 0) == pid) return status;
    if (errno != EINTR) {
      error = "pid " + std::to_string(pid) +
              " was reaped elsewhere (waitpid: " + std::strerror(errno) + ")";
      return std::nullopt;
    }
  }
}

}  // namespace

struct RunningCommand::State {
  CommandOutcome failed;  ///< kSpawnFailed when nothing was started
  pid_t pid = -1;         ///< the child, until it is reaped
  sys::UniqueFd out;
  sys::UniqueFd err;
  Clock::time_point deadline;
  SigchldNotIgnored sigchld;
  bool finished = false;
};

RunningCommand::RunningCommand(std::unique_ptr<State> state) : state_(std::move(state)) {}

RunningCommand::~RunningCommand() {
  if (state_->finished || state_->pid < 0) return;
  // Abandoned: the group goes now, and the child is reaped (it cannot outlive SIGKILL).
  if (KillGroup(state_->pid).empty()) {
    std::string ignored;
    (void)Reap(state_->pid, ignored);
  }
}

std::unique_ptr<RunningCommand> RunningCommand::Start(const std::vector<std::string>& argv,
                                                      const EnvMap& env, double timeout_s,
                                                      int nice) {
  auto state = std::make_unique<State>();
  state->deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  auto fail = [&state](std::string reason) {
    state->failed = SpawnFailed(std::move(reason));
    return std::unique_ptr<RunningCommand>(new RunningCommand(std::move(state)));
  };
  auto stdin_null = sys::OpenCloexec("/dev/null", O_RDONLY);
  if (!stdin_null.ok()) return fail(stdin_null.error().what);
  auto out_pipe = sys::MakePipe("stdout");
  if (!out_pipe.ok()) return fail(out_pipe.error().what);
  auto err_pipe = sys::MakePipe("stderr");
  if (!err_pipe.ok()) return fail(err_pipe.error().what);
  if (std::string problem = state->sigchld.Apply(); !problem.empty()) return fail(problem);

  sys::SpawnRequest request;
  request.program = argv.empty() ? std::string() : argv[0];
  request.argv = argv;
  request.env = env.ToStrings();
  request.stdin_fd = stdin_null->get();
  request.stdout_fd = out_pipe->write.get();
  request.stderr_fd = err_pipe->write.get();
  // The spawner's child setup makes the child lead its own group (so a timeout can kill
  // its helpers too), restores default signal handling with an empty mask whatever this
  // process blocked or ignored, and lets nothing but 0, 1 and 2 through exec.
  sys::Spawner spawner;
  sys::SpawnError failure;
  const Result<pid_t> spawned = spawner.Spawn(request, &failure);
  // The child holds its own copies now; ours would keep the pipes from reaching EOF.
  out_pipe->write.Reset();
  err_pipe->write.Reset();
  stdin_null->Reset();
  if (!spawned.ok()) {
    return fail(failure.error_number != 0 ? std::strerror(failure.error_number)
                                          : spawned.error().what);
  }
  state->pid = *spawned;
  if (nice > 0) {
    // Its whole group (it leads one): helpers it forked already go along, later ones inherit.
    // Failing is harmless: the child just keeps the ordinary priority.
    errno = 0;
    const int base = ::getpriority(PRIO_PROCESS, 0);
    if (errno == 0)
      ::setpriority(PRIO_PGRP, static_cast<id_t>(*spawned), std::min(base + nice, 19));
  }
  state->out = std::move(out_pipe->read);
  state->err = std::move(err_pipe->read);
  return std::unique_ptr<RunningCommand>(new RunningCommand(std::move(state)));
}

bool RunningCommand::Exited() const {
  const State& s = *state_;
  if (s.finished || s.pid < 0) return true;
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(s.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    return errno != EINTR;  // ECHILD: reaped elsewhere; Finish reports that at once
  }
  return info.si_pid == s.pid;
}

CommandOutcome RunningCommand::Finish() {
  State& s = *state_;
  s.finished = true;
  if (s.pid < 0) return s.failed;
  const pid_t pid = std::exchange(s.pid, -1);
  CommandOutcome outcome;
  // Both pipes at EOF usually means the child has exited; one that closed them and runs
  // on still gets only until the deadline.
  const Wait wait = ReadUntilEof(s.out, s.err, s.deadline, outcome)
                        ? WaitForExit(pid, s.deadline, outcome.error)
                        : Wait::kDeadline;
  if (wait == Wait::kLost) {
    // Its group number may belong to someone else by now: nothing is signalled.
    outcome.kind = CommandOutcome::Kind::kSpawnFailed;
    return outcome;
  }
  // Exited or not, the group goes: at the deadline the child and its helpers, after an
  // exit the helpers it left behind.
  if (std::string problem = KillGroup(pid); !problem.empty()) {
    if (outcome.error.empty()) outcome.error = problem;
    if (wait == Wait::kDeadline) {
      // Nothing was killed, so a blocking wait could last forever: leave it running.
      outcome.kind = CommandOutcome::Kind::kTimedOut;
      return outcome;
    }
  }
  const std::optional<int> status = Reap(pid, outcome.error);
  if (wait == Wait::kDeadline) {
    outcome.kind = CommandOutcome::Kind::kTimedOut;
  } else if (!status) {
    outcome.kind = CommandOutcome::Kind::kSpawnFailed;
  } else if (WIFSIGNALED(*status)) {
    outcome.kind = CommandOutcome::Kind::kSignaled;
    outcome.code = WTERMSIG(*status);
  } else {
    outcome.kind = CommandOutcome::Kind::kExited;
    outcome.code = WEXITSTATUS(*status);
  }
  return outcome;
}

CommandOutcome LocalCommandRunner::Run(const std::vector<std::string>& argv, const EnvMap& env,
                                       double timeout_s) const {
  return RunningCommand::Start(argv, env, timeout_s)->Finish();
}

}  // namespace gculaunch
