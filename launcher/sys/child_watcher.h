// ChildWatcher: event-driven detection of child exits, and the only place
// where gculaunch reaps its children.
//
// An exit is read with waitid(WNOWAIT): the child stays a zombie, and its pid
// (which is also its process group's number) cannot be given to another
// process, until the owner calls Release() (sys/process_group.h says why).
//
// The mechanism is chosen at run time, when the watcher is constructed:
//
//   pidfd    pidfd_open(pid) (Linux 5.3+) gives a descriptor that becomes
//            readable when the child exits; it is waited on with an Asio
//            stream_descriptor, then the child is reaped with
//            waitpid(pid, WNOHANG).
//   sigchld  when pidfd_open fails (ENOSYS on kernels before 5.3, EPERM or
//            ENOSYS under seccomp profiles that predate it), or when forced:
//            an asio::signal_set on SIGCHLD; on each delivery, waitid(pid,
//            WNOHANG | WNOWAIT) over the watched children only.
//
// Either way only watched pids are reaped (never waitpid(-1)): the guardian,
// also a child of gculaunch, is left to sys::Guardian.  In pidfd mode a single
// pidfd_open failure for one child (EMFILE, say) moves just that child to the
// SIGCHLD path.
//
// Lifetime: the io_context must outlive the watcher.  Children still watched
// or not released when the watcher is destroyed are not reaped (WorkerGroup
// never lets that happen, except on the way out after a stuck report).  Handlers run on the
// io_context thread.
//
// Thread safety: use from the io_context's thread only.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "base/lifetime.h"
#include "launcher/sys/worker_exit.h"

namespace gculaunch::sys {

class ChildWatcher {
 public:
  enum class Mode { kPidfd, kSigchld };
  using ExitHandler = std::function<void(pid_t pid, WorkerExit exit)>;

  /// Probes pidfd_open() unless `force_sigchld`.
  ChildWatcher(boost::asio::io_context& io, bool force_sigchld);
  ~ChildWatcher();
  ChildWatcher(const ChildWatcher&) = delete;
  ChildWatcher& operator=(const ChildWatcher&) = delete;

  Mode mode() const { return mode_; }
  /// "pidfd" or "sigchld".
  const char* mode_name() const { return mode_ == Mode::kPidfd ? "pidfd" : "sigchld"; }
  /// Why the SIGCHLD path is used ("forced", "pidfd_open: Function not
  /// implemented"); empty in pidfd mode.
  const std::string& fallback_reason() const { return fallback_reason_; }

  /// Starts watching `pid`, a child of this process that nobody has reaped.
  /// `handler` runs once, on the io_context, after the child exited; the
  /// child stays a zombie until Release(pid).
  void Watch(pid_t pid, ExitHandler handler);

  /// Reaps `pid`, whose exit the handler reported: its number is free from now on.
  void Release(pid_t pid);

  /// Children watched whose exit was not reported yet.
  size_t watched() const { return pidfd_children_.size() + sigchld_children_.size(); }
  /// Children whose exit was reported and that are not released yet.
  size_t unreleased() const { return exited_.size(); }

 private:
  struct PidfdChild;
  void ArmPidfd(const std::shared_ptr<PidfdChild>& child);
  void EnsureSigchldSet();
  void ArmSigchld();
  void ReapSigchldChildren();

  boost::asio::io_context& io_;
  Mode mode_;
  std::string fallback_reason_;
  std::map<pid_t, std::shared_ptr<PidfdChild>> pidfd_children_;
  std::map<pid_t, ExitHandler> sigchld_children_;
  std::set<pid_t> exited_;  ///< reported, still zombies
  /// Created on first need (always in sigchld mode).  Registered before the
  /// first child is added to sigchld_children_, then a direct waitpid check
  /// catches a child that exited before the registration.
  std::unique_ptr<boost::asio::signal_set> sigchld_;
  bool sigchld_armed_ = false;
  /// Lets handlers posted to the io_context notice that the watcher is gone.  Last member;
  /// the destructor expires it first.
  LifetimeGuard lifetime_;
};

/// pidfd_open(2) through syscall(): a close-on-exec descriptor or -1 with errno.
int PidfdOpen(pid_t pid);

}  // namespace gculaunch::sys
