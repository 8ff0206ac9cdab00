#include "launcher/sys/process_setup.h"

#include <fcntl.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>

namespace gculaunch::sys {

void EnsureStdioOpen() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      // open() returns the lowest free number: exactly `fd`.  Not close-on-
      // exec on purpose: it stands in for a standard stream.
      const int opened = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
      if (opened >= 0 && opened != fd) ::close(opened);
    }
  }
}

void IgnoreSigpipe() {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, nullptr);
}

void DefaultSigchld() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGCHLD, &dfl, nullptr);
}

namespace {

sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2}) sigaddset(&set, sig);
  return set;
}

}  // namespace

void HoldStopSignals() {
  const sigset_t set = StopSignals();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void ReleaseStopSignals() {
  const sigset_t set = StopSignals();
  ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

bool SignalIgnored(int sig) {
  struct sigaction current {};
  return ::sigaction(sig, nullptr, &current) == 0 && current.sa_handler == SIG_IGN;
}

bool StdinIsTerminal() { return ::isatty(STDIN_FILENO) == 1; }

bool OwnsTerminal() { return StdinIsTerminal() && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp(); }

void ReclaimTerminal() {
  if (!StdinIsTerminal() || ::tcgetpgrp(STDIN_FILENO) == ::getpgrp()) return;
  // A background group may take the terminal only with SIGTTOU blocked.
  sigset_t ttou, old;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  ::pthread_sigmask(SIG_BLOCK, &ttou, &old);
  ::tcsetpgrp(STDIN_FILENO, ::getpgrp());
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

}  // namespace gculaunch::sys
