#include "launcher/ops/readiness.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "base/text.h"

namespace gculaunch {

namespace {

// A counter key (ADD) that reached `n`.
bool Reached(const StoreLookup& find, const std::string& key, int n) {
  const std::string* value = find(key);
  return value != nullptr && std::strtoll(value->c_str(), nullptr, 10) >= n;
}

// Every rank's address in gloo's full mesh of the default group: keys <prefix>0 .. <prefix>N-1.
bool MeshComplete(const StoreLookup& find, const std::string& prefix, int world_size) {
  for (int r = world_size - 1; r >= 0; --r) {  // the last rank is usually the last to arrive
    if (find(prefix + std::to_string(r)) == nullptr) return false;
  }
  return true;
}

}  // namespace

// TCPStore puts "/" before every key; the agent-store path of torch 1.13 to 2.x (until
// "a new TCPStore for every retry" dropped it) adds "/worker/attempt_<restart count>".  Under
// that, init_process_group's PrefixStore("default_pg"):
//   * its store barrier: "store_based_barrier_key:1" (1.13 and 2.0: the group count), or
//     "store_based_barrier_key:0" (2.1+: the group's name, only with TORCH_DIST_INIT_BARRIER=1
//     or TORCH_DISTRIBUTED_DEBUG=DETAIL), ADDed to by every rank: done at WORLD_SIZE;
//   * 2.1+ without the barrier: gloo's full mesh under "<group>/<device>/" and gloo's own
//     device index, "0//cpu//0/<rank>", one key per rank holding its address: once all are
//     there every rank connects and returns;
//   * NCCL creates its communicators lazily on 2.1+ and leaves nothing at init: its first
//     communicator's id, "0//cuda//0" (ncclCommCounter_ 0), which rank 0 writes and every
//     other rank waits for, marks the first collective (or init, with device_id).
std::optional<std::string> InitMark(const StoreLookup& find, int restart_count, int world_size) {
  if (world_size <= 0) return std::nullopt;
  const std::vector<std::string> prefixes = {
      "//worker/attempt_" + std::to_string(restart_count) + "/default_pg/", "/default_pg/"};
  for (const std::string& p : prefixes) {
    if (Reached(find, p + "store_based_barrier_key:1", world_size)) {
      return "torch's store barrier after init_process_group (torch 1.13, 2.0)";
    }
    if (Reached(find, p + "store_based_barrier_key:0", world_size)) {
      return "torch's store barrier after init_process_group (TORCH_DIST_INIT_BARRIER=1)";
    }
    if (MeshComplete(find, p + "0//cpu//0/", world_size)) {
      return "every rank's address in gloo's full mesh (torch 2.x)";
    }
    if (find(p + "0//cuda//0") != nullptr) {
      return "the first NCCL communicator's id from rank 0 (torch 2.x)";
    }
  }
  return std::nullopt;
}

std::string Readiness::Line() const { return (ready ? "ready: " : "not ready: ") + reason; }

namespace {

// Not ready before the ranks of the current epoch all run: why, or nullopt when they do.
std::optional<std::string> NotRunning(const ReadinessInput& in) {
  const JobSnapshot& s = *in.job;
  if (s.exit_code) return "the job is over (exit code " + std::to_string(*s.exit_code) + ")";
  if (s.restart_backoff_s > 0) {
    return "restarting: the next restart waits " +
           Seconds(std::chrono::duration<double>(std::max(0.0, s.next_restart_time - in.now))) +
           " more (--restart-backoff)";
  }
  if (s.epoch < 0) {
    return in.multinode ? std::string("waiting for the rendezvous of the nodes")
                        : std::string("the ranks are starting");
  }
  for (const RankStatus& r : s.ranks) {
    if (!r.exit) continue;
    return "rank " + std::to_string(r.rank) + " of epoch " + std::to_string(s.epoch) +
           (r.exit->success() ? " finished" : " exited with " + r.exit->Describe()) +
           "; its local ranks are stopping or restarting";
  }
  const int started = static_cast<int>(s.ranks.size());
  if (started < s.nproc_per_node) {
    return std::to_string(started) + " of " + std::to_string(s.nproc_per_node) +
           " local ranks of epoch " + std::to_string(s.epoch) + " started";
  }
  return std::nullopt;
}

}  // namespace

Readiness AssessReadiness(const ReadinessInput& in) {
  if (auto why = NotRunning(in)) return {false, *why};
  const JobSnapshot& s = *in.job;
  const std::string ranks =
      Plural(s.nproc_per_node, "local rank") + " of epoch " + std::to_string(s.epoch) + " running";
  if (!in.init_unknown.empty()) {
    return {true, ranks + " (whether they passed init_process_group is not visible here: " +
                      in.init_unknown + ")"};
  }
  if (!in.init_mark) {
    return {false, ranks + "; waiting for every rank to pass init_process_group"};
  }
  return {true, ranks + ", every rank passed init_process_group (" + *in.init_mark + ")"};
}

}  // namespace gculaunch
