#include "launcher/sys/child_watcher.h"

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <vector>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

namespace gculaunch::sys {

namespace asio = boost::asio;

struct ChildWatcher::PidfdChild {
  PidfdChild(asio::io_context& io, pid_t p, int fd, ExitHandler h)
      : pid(p), descriptor(io, fd), handler(std::move(h)) {}
  pid_t pid;
  asio::posix::stream_descriptor descriptor;
  ExitHandler handler;
};

namespace {

// Reads the exit of `pid` without reaping it (waitid with WNOWAIT), retried on EINTR.
// Returns true and a waitpid-style status when the child has exited.
bool TryReadExit(pid_t pid, int* status) {
  for (;;) {
    siginfo_t info{};
    const int r = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      // ECHILD: someone else reaped it and the exit status is lost.  This is a bug in
      // gculaunch (one component must own reaping); report it as a kill.
      *status = SIGKILL;
      return true;
    }
    if (info.si_pid != pid) return false;  // still running
    if (info.si_code == CLD_EXITED) {
      *status = (info.si_status & 0xff) << 8;
    } else {
      *status = (info.si_status & 0x7f) | (info.si_code == CLD_DUMPED ? 0x80 : 0);
    }
    return true;
  }
}

}  // namespace

int PidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

ChildWatcher::ChildWatcher(asio::io_context& io, bool force_sigchld)
    : io_(io), mode_(Mode::kPidfd) {
  if (force_sigchld) {
    mode_ = Mode::kSigchld;
    fallback_reason_ = "forced";
  } else {
    const int fd = PidfdOpen(::getpid());
    if (fd < 0) {
      mode_ = Mode::kSigchld;
      fallback_reason_ = std::string("pidfd_open: ") + std::strerror(errno);
    } else {
      ::close(fd);
    }
  }
  if (mode_ == Mode::kSigchld) EnsureSigchldSet();
}

ChildWatcher::~ChildWatcher() {
  lifetime_.Expire();
  for (auto& [pid, child] : pidfd_children_) {
    boost::system::error_code ignored;
    child->descriptor.cancel(ignored);
  }
  if (sigchld_) {
    boost::system::error_code ignored;
    sigchld_->cancel(ignored);
  }
}

void ChildWatcher::Watch(pid_t pid, ExitHandler handler) {
  if (mode_ == Mode::kPidfd) {
    const int fd = PidfdOpen(pid);
    if (fd >= 0) {
      auto child = std::make_shared<PidfdChild>(io_, pid, fd, std::move(handler));
      pidfd_children_.emplace(pid, child);
      ArmPidfd(child);
      return;
    }
    // This child alone goes the SIGCHLD way (EMFILE, or pidfd_open denied now).
  }
  EnsureSigchldSet();
  sigchld_children_.emplace(pid, std::move(handler));
  // The child may have exited before SIGCHLD was being caught.
  asio::post(io_, lifetime_.Wrap([this] { ReapSigchldChildren(); }));
}

void ChildWatcher::Release(pid_t pid) {
  if (exited_.erase(pid) == 0) return;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) < 0 && errno == EINTR) {
  }
}

void ChildWatcher::ArmPidfd(const std::shared_ptr<PidfdChild>& child) {
  auto on_readable = lifetime_.Wrap([this, child](const boost::system::error_code& ec) {
    if (ec == asio::error::operation_aborted) return;
    int status = 0;
    if (!TryReadExit(child->pid, &status)) {
      ArmPidfd(child);  // spurious wake-up
      return;
    }
    pidfd_children_.erase(child->pid);
    exited_.insert(child->pid);
    boost::system::error_code ignored;
    child->descriptor.close(ignored);
    ExitHandler handler = std::move(child->handler);
    handler(child->pid, WorkerExit::FromWaitStatus(status));
  });
  child->descriptor.async_wait(asio::posix::stream_descriptor::wait_read, std::move(on_readable));
}

void ChildWatcher::EnsureSigchldSet() {
  if (!sigchld_) {
    sigchld_ = std::make_unique<asio::signal_set>(io_, SIGCHLD);
  }
  if (!sigchld_armed_) ArmSigchld();
}

void ChildWatcher::ArmSigchld() {
  sigchld_armed_ = true;
  sigchld_->async_wait(
      lifetime_.Wrap([this, token = lifetime_.token()](const boost::system::error_code& ec, int) {
        if (ec == asio::error::operation_aborted) return;
        sigchld_armed_ = false;
        ReapSigchldChildren();  // a handler may destroy the watcher
        if (!token.expired() && !sigchld_armed_) ArmSigchld();
      }));
}

void ChildWatcher::ReapSigchldChildren() {
  // Collect first, then call handlers: a handler may Watch() new children.
  std::vector<std::pair<pid_t, int>> reaped;
  for (const auto& [pid, handler] : sigchld_children_) {
    int status = 0;
    if (TryReadExit(pid, &status)) reaped.emplace_back(pid, status);
  }
  for (const auto& [pid, status] : reaped) {
    auto it = sigchld_children_.find(pid);
    if (it == sigchld_children_.end()) continue;
    ExitHandler handler = std::move(it->second);
    sigchld_children_.erase(it);
    exited_.insert(pid);
    const LifetimeGuard::Token token = lifetime_.token();
    handler(pid, WorkerExit::FromWaitStatus(status));
    if (token.expired()) return;  // the handler destroyed the watcher
  }
}

}  // namespace gculaunch::sys
