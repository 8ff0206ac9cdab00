// GroupTracker: the process groups one owner started (an attempt's ranks, the warm-rank
// standbys), from the spawn to the release of their leaders.  WorkerGroup and StandbyPool each
// hold one; this is their only copy of the rules of process_group.h.
//
//   Spawn      the child leads its own group (Spawner); the guardian hears "+pgid start"; the
//              ChildWatcher watches its exit, which goes to the owner's handler.
//   exit       the leader stays a zombie, so the group's number cannot go to another process:
//              signalling the group can never reach a stranger.
//   ReleaseEmpty  one /proc scan for every exited leader: a group with no member left (zombies
//              do not count) is released: the zombie is reaped (ChildWatcher::Release), the
//              guardian hears "-pgid", and the group is forgotten, never signalled again.  A
//              scan that fails releases nothing ("cannot look" is never "empty").
//   Abandon    a group the owner gives up (a dismissed standby): SIGKILL now and at every
//              later look while it has members; its exit goes to no handler; released once
//              empty like any other.
//   HandOver   moves one live group, with a new exit handler, to another tracker (a standby
//              becoming a rank of an attempt).
//
// The owner decides when to look (a timer, a drain check): there is no event for processes
// that are not gculaunch's children.
//
// Lifetime: the Spawner, ChildWatcher and Guardian outlive the tracker.  Groups not released
// when it is destroyed keep their zombies (the owner releases everything first, except on the
// way out after a stuck report).  Exit handlers run on the io_context and may call the
// tracker, but must not destroy it.
// Thread safety: the io_context's thread only.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <vector>

#include "base/error.h"
#include "launcher/sys/child_watcher.h"
#include "launcher/sys/guardian.h"
#include "launcher/sys/spawner.h"
#include "launcher/sys/worker_exit.h"

namespace gculaunch::sys {

class GroupTracker {
 public:
  using ExitHandler = ChildWatcher::ExitHandler;

  /// `guardian` may be null (tests, or no guardian could be started).
  GroupTracker(Spawner& spawner, ChildWatcher& watcher, Guardian* guardian);
  ~GroupTracker();
  GroupTracker(const GroupTracker&) = delete;
  GroupTracker& operator=(const GroupTracker&) = delete;

  /// Spawns `request` as the leader of a new group, tells the guardian and watches its exit:
  /// `on_exit` runs once, on the io_context, unless the group is abandoned or handed over
  /// first.
  Result<pid_t> Spawn(const SpawnRequest& request, ExitHandler on_exit,
                      SpawnError* failure = nullptr);
  /// Moves group `pid` to `to`; its exit goes to `on_exit` from now on.  REQUIRES: held here,
  /// its exit not reported yet.
  void HandOver(pid_t pid, GroupTracker& to, ExitHandler on_exit);
  /// Sends `sig` to group `pid` if it is held here (not released).  False when it is not, or
  /// has no member left.
  bool Signal(pid_t pid, int sig);
  /// Kills group `pid` (SIGKILL) and forgets its exit handler; it is released once empty.
  void Abandon(pid_t pid);
  /// Looks at every exited leader's group (one /proc scan) and releases the empty ones;
  /// abandoned groups that still have members get SIGKILL again.  An error when /proc could
  /// not be read (then nothing was released).
  Status ReleaseEmpty();

  /// Group `pid` was spawned or handed over here and is not released yet.
  bool Holds(pid_t pid) const { return groups_.count(pid) != 0; }
  /// The exit of group `pid`'s leader was reported.
  bool Exited(pid_t pid) const;
  /// The groups held (not released), abandoned ones included.
  std::vector<pid_t> Held() const;
  size_t held() const { return groups_.size(); }
  size_t abandoned() const;

 private:
  /// What the watcher's handler shares with the tracker that holds the group now.
  struct Slot {
    ExitHandler handler;
    bool exited = false;
  };
  struct Group {
    std::shared_ptr<Slot> slot;
    bool abandoned = false;
  };
  void Release(pid_t pid);

  Spawner& spawner_;
  ChildWatcher& watcher_;
  Guardian* guardian_;
  std::map<pid_t, Group> groups_;
};

}  // namespace gculaunch::sys
