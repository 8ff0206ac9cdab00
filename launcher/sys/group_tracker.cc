#include "launcher/sys/group_tracker.h"

#include <signal.h>

#include <set>
#include <utility>

#include "launcher/sys/process_group.h"

namespace gculaunch::sys {

GroupTracker::GroupTracker(Spawner& spawner, ChildWatcher& watcher, Guardian* guardian)
    : spawner_(spawner), watcher_(watcher), guardian_(guardian) {}

GroupTracker::~GroupTracker() {
  // The watcher may still report an exit of a group never released: nobody hears it.
  for (auto& [pid, group] : groups_) group.slot->handler = nullptr;
}

Result<pid_t> GroupTracker::Spawn(const SpawnRequest& request, ExitHandler on_exit,
                                  SpawnError* failure) {
  auto pid = spawner_.Spawn(request, failure);
  if (!pid.ok()) return pid;
  if (guardian_ != nullptr) guardian_->GroupStarted(*pid, ProcessStartTime(*pid));
  auto slot = std::make_shared<Slot>();
  slot->handler = std::move(on_exit);
  watcher_.Watch(*pid, [slot](pid_t child, WorkerExit exit) {
    slot->exited = true;
    // A copy: the handler may hand the group over, which replaces slot->handler.
    if (ExitHandler handler = slot->handler) handler(child, exit);
  });
  groups_[*pid] = Group{std::move(slot), false};
  return pid;
}

void GroupTracker::HandOver(pid_t pid, GroupTracker& to, ExitHandler on_exit) {
  auto it = groups_.find(pid);
  if (it == groups_.end()) return;
  Group group = std::move(it->second);
  groups_.erase(it);
  group.slot->handler = std::move(on_exit);
  to.groups_[pid] = std::move(group);
}

bool GroupTracker::Signal(pid_t pid, int sig) {
  // A released group's number may belong to a stranger by now.
  if (!Holds(pid)) return false;
  return SignalGroup(pid, sig);
}

void GroupTracker::Abandon(pid_t pid) {
  auto it = groups_.find(pid);
  if (it == groups_.end()) return;
  it->second.abandoned = true;
  it->second.slot->handler = nullptr;
  SignalGroup(pid, SIGKILL);
}

Status GroupTracker::ReleaseEmpty() {
  std::set<pid_t> asked;
  for (const auto& [pid, group] : groups_) {
    if (group.slot->exited) asked.insert(pid);
  }
  if (asked.empty()) return OkStatus();
  auto live = LiveGroups(asked);
  if (!live.ok()) return live.error();  // cannot look: nothing is known to be empty
  for (pid_t pid : asked) {
    if (live->count(pid) == 0) {
      Release(pid);
    } else if (groups_[pid].abandoned) {
      SignalGroup(pid, SIGKILL);  // a member the first SIGKILL missed (it was being forked)
    }
  }
  return OkStatus();
}

void GroupTracker::Release(pid_t pid) {
  watcher_.Release(pid);  // the number is free from now on
  if (guardian_ != nullptr) guardian_->GroupGone(pid);
  groups_.erase(pid);
}

bool GroupTracker::Exited(pid_t pid) const {
  auto it = groups_.find(pid);
  return it != groups_.end() && it->second.slot->exited;
}

std::vector<pid_t> GroupTracker::Held() const {
  std::vector<pid_t> pids;
  pids.reserve(groups_.size());
  for (const auto& [pid, group] : groups_) pids.push_back(pid);
  return pids;
}

size_t GroupTracker::abandoned() const {
  size_t n = 0;
  for (const auto& [pid, group] : groups_) n += group.abandoned ? 1 : 0;
  return n;
}

}  // namespace gculaunch::sys
