// Liveness: telling a slow node from a dead one (docs/multinode.md, "Slow is not dead"), as
// pure arithmetic over instants that the caller reads from the monotonic clock.
//
// Evidence of death never comes through here: the executors act on it at once (a connection
// closed or reset, TCP keepalive or TCP_USER_TIMEOUT giving up on a peer host, a bye, a backend
// lease that ended).  What is left is silence over a connection that is still up: a peer that
// is stopped, starved of CPU or wedged, and this process itself being late.  It is judged so:
//
//   * Silence counts only the time this process ran.  OwnLag adds up how late the caller's
//     own periodic tick fired (the process was stopped, starved or busy): meanwhile the
//     peer's messages may have been waiting unread in the socket, so that time is taken off.
//   * Anything heard from the peer ends its silence (PeerSilence::Heard), not only a
//     heartbeat.  A peer that is only asked now and then (node 0, seen from an agent) is
//     silent only while a question is outstanding (Expect / Idle).
//   * The bound adapts to what the job has seen: `multiple` times the longest gap between two
//     messages of the peer in the last two windows of kGapWindow gaps, never under `floor`
//     nor over `ceiling` (--node-timeout; the floor is half of it when node 0 judges a node,
//     all of it when a node judges node 0: ForMasterNode).
//
//   OwnLag lag(250ms);             every tick:  lag.Tick(now)
//   PeerSilence peer(now, lag.total());
//   on a message:                  peer.Heard(now, lag.total())
//   on a tick:                     if (peer.Lost(now, lag.total(), rule)) -> the node is lost
//
// tests/launcher/cluster/liveness_test.cc has the tables.
// Thread safety: plain values.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>

namespace gculaunch::job {

using LiveClock = std::chrono::steady_clock;

/// How long a peer may stay silent over an open connection.
struct SilenceRule {
  std::chrono::milliseconds floor{15000};
  std::chrono::milliseconds ceiling{30000};  ///< --node-timeout
  int multiple = 4;
  /// The rule of --node-timeout `timeout` for node 0 judging a node: ceiling `timeout`,
  /// floor half of it.
  static SilenceRule ForNodeTimeout(std::chrono::milliseconds timeout);
  /// The rule for a node judging node 0: the whole `timeout`.  Node 0 serves every node, so
  /// it is the one whose answers slow down as the job grows (a hub starved of CPU), and
  /// losing it stops every node; a node's own work does not grow with the job.
  static SilenceRule ForMasterNode(std::chrono::milliseconds timeout);
};

/// How often a node heartbeats to node 0 in a job of `nodes` nodes: every second, and in a
/// large job every nodes / kBeatsPerSecond seconds, so that node 0 hears at most that many
/// beats a second (each costs it a read and a write; 16k nodes beating every second kept a
/// third of its core busy), but at least eight times within --node-timeout `node_timeout`
/// (node 0's bound on a node's silence is never below half of it).
inline constexpr double kBeatsPerSecond = 4000;
std::chrono::milliseconds HeartbeatInterval(int nodes, std::chrono::milliseconds node_timeout);

/// This process's own lateness, measured by a tick that is meant to run every `period`.
class OwnLag {
 public:
  explicit OwnLag(LiveClock::duration period) : period_(period) {}
  /// Ticking (re)starts at `now`: the time since the last tick is not judged.
  void Resume(LiveClock::time_point now);
  /// The tick ran at `now`; adds and returns how much later than `period` after the last
  /// tick (or Resume) that was.
  LiveClock::duration Tick(LiveClock::time_point now);
  /// All the lateness so far; it only grows.
  LiveClock::duration total() const { return total_; }

 private:
  LiveClock::duration period_;
  LiveClock::time_point last_{};
  bool running_ = false;
  LiveClock::duration total_{};
};

/// One peer's silence.  `lag` arguments are OwnLag::total() at the same instant.
class PeerSilence {
 public:
  /// Gaps remembered for the bound: the longest of the last two windows of this many.
  static constexpr int kGapWindow = 64;

  /// Idle: nothing is expected yet (call Expect, or Heard).
  PeerSilence() = default;
  /// Expecting from `now` on, as if the peer had just been heard.
  PeerSilence(LiveClock::time_point now, LiveClock::duration lag);

  /// Something arrived from the peer: its silence ends, and (while expecting) the gap since
  /// the last message counts towards the bound.
  void Heard(LiveClock::time_point now, LiveClock::duration lag);
  /// A question went out: from `now` on, silence counts (no change while already counting).
  void Expect(LiveClock::time_point now, LiveClock::duration lag);
  /// Nothing is outstanding: silence does not count until the next Expect.
  void Idle() { expecting_ = false; }

  /// How long the peer has been silent, in this process's own running time.
  LiveClock::duration Silent(LiveClock::time_point now, LiveClock::duration lag) const;
  /// The longest gap of the last two windows.
  LiveClock::duration longest_gap() const { return std::max(window_max_, previous_max_); }
  /// `multiple` times longest_gap(), within [floor, ceiling] (a floor above the ceiling
  /// gives the ceiling).
  LiveClock::duration Bound(const SilenceRule& rule) const;
  bool Lost(LiveClock::time_point now, LiveClock::duration lag, const SilenceRule& rule) const;

 private:
  void Record(LiveClock::duration gap);

  LiveClock::time_point since_{};
  LiveClock::duration lag_at_since_{};
  bool expecting_ = false;
  LiveClock::duration window_max_{};
  LiveClock::duration previous_max_{};
  int in_window_ = 0;
};

/// The reason in a "was lost" line: "nothing heard for 15.2 s over a connection that stayed
/// open (the bound: 15.0 s, between half of and the whole --node-timeout 30 s)", or "(the
/// bound: --node-timeout 30 s)" when the rule has no range.
std::string SilenceText(LiveClock::duration silent, LiveClock::duration bound,
                        const SilenceRule& rule);

}  // namespace gculaunch::job
