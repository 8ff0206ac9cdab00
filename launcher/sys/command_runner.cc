#include "launcher/sys/command_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace gculaunch {
namespace {

// Closes the fds it holds on every path out of Run().
struct Fds {
  int fd[4] = {-1, -1, -1, -1};  // out read, out write, err read, err write
  ~Fds() {
    for (int f : fd) {
      if (f >= 0) ::close(f);
    }
  }
  void Close(int i) {
    if (fd[i] >= 0) ::close(fd[i]);
    fd[i] = -1;
  }
};

// Owns the spawn attributes and file actions.
struct SpawnSetup {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  SpawnSetup() {
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
};

void Append(std::string& buffer, const char* data, size_t size) {
  const size_t room =
      CommandOutcome::kMaxOutput - std::min(buffer.size(), CommandOutcome::kMaxOutput);
  buffer.append(data, std::min(size, room));
}

int WaitFor(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

}  // namespace

CommandOutcome LocalCommandRunner::Run(const std::vector<std::string>& argv, const EnvMap& env,
                                       double timeout_s) const {
  CommandOutcome outcome;
  Fds fds;
  if (::pipe2(fds.fd, O_CLOEXEC) != 0 || ::pipe2(fds.fd + 2, O_CLOEXEC) != 0) {
    outcome.kind = CommandOutcome::Kind::kSpawnFailed;
    outcome.error = std::string("pipe: ") + std::strerror(errno);
    return outcome;
  }

  SpawnSetup setup;
  // Own process group (so a timeout can kill helpers too), default signal
  // handling and an empty mask whatever the caller blocked or ignored.
  sigset_t empty;
  sigset_t all;
  sigemptyset(&empty);
  sigfillset(&all);
  posix_spawnattr_setflags(&setup.attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&setup.attr, 0);
  posix_spawnattr_setsigmask(&setup.attr, &empty);
  posix_spawnattr_setsigdefault(&setup.attr, &all);
  posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&setup.actions, fds.fd[1], 1);
  posix_spawn_file_actions_adddup2(&setup.actions, fds.fd[3], 2);

  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const std::vector<std::string> env_strings = env.ToStrings();
  std::vector<char*> envp;
  for (const std::string& item : env_strings) envp.push_back(const_cast<char*>(item.c_str()));
  envp.push_back(nullptr);

  pid_t pid = -1;
  const int rc =
      ::posix_spawn(&pid, argv[0].c_str(), &setup.actions, &setup.attr, args.data(), envp.data());
  fds.Close(1);
  fds.Close(3);
  if (rc != 0) {
    outcome.kind = CommandOutcome::Kind::kSpawnFailed;
    outcome.error = std::strerror(rc);
    return outcome;
  }

  using Clock = std::chrono::steady_clock;
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  bool timed_out = false;
  char buffer[65536];
  while (fds.fd[0] >= 0 || fds.fd[2] >= 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd polls[2] = {{fds.fd[0], POLLIN, 0}, {fds.fd[2], POLLIN, 0}};
    const int ready = ::poll(polls, 2, static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (ready < 0) {
      if (errno == EINTR) continue;
      timed_out = true;  // cannot wait any more: treat as a hang and clean up
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (polls[i].fd < 0 || polls[i].revents == 0) continue;
      const ssize_t n = ::read(polls[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        Append(i == 0 ? outcome.out : outcome.err, buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds.Close(i * 2);
      }
    }
  }
  // Both pipes at EOF usually means the child has exited; one that closed
  // them and runs on still gets only until the deadline.  (Short polls: the
  // probe cannot use pidfds, which older kernels of training images lack.)
  int status = 0;
  while (!timed_out) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) break;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    ::poll(nullptr, 0, static_cast<int>(std::min<long long>(left, 20)));
  }
  if (timed_out) {
    ::kill(-pid, SIGKILL);
    WaitFor(pid);
    outcome.kind = CommandOutcome::Kind::kTimedOut;
    return outcome;
  }
  // Helpers the child left in its group go too.  The group id cannot have
  // been reused: the kernel keeps a pid number allocated while it names a group.
  ::kill(-pid, SIGKILL);
  if (WIFSIGNALED(status)) {
    outcome.kind = CommandOutcome::Kind::kSignaled;
    outcome.code = WTERMSIG(status);
  } else {
    outcome.kind = CommandOutcome::Kind::kExited;
    outcome.code = WEXITSTATUS(status);
  }
  return outcome;
}

}  // namespace gculaunch
