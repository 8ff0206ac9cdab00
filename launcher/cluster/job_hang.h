// JobHang: --hang-timeout across nodes, the pure part (docs/multinode.md, "Hangs").
//
// Every node other than 0 publishes, a few times a second, a progress report
// (job/progress/<k>): the epoch its ranks run in, a sequence number, and each rank's progress
// as RankProgress (hang_check.h: ages of its last output and heartbeat, time since start).
// Node 0 alone decides.  It notes when it first saw each report (the nodes' clocks are never
// compared: a report's ages grow by the time since node 0 saw it, which can only make a node
// look quieter than it is, by at most one report period), merges them with its own ranks'
// progress and applies the single-node rule, CheckHang, to the whole job:
//   * silence of every rank of every node for the timeout (after the start-up grace) is a
//     hang;
//   * a rank whose own heartbeat stopped while another rank of the job, on any node, still
//     beats is flagged by itself.
// As long as a node has not reported for the current epoch (its ranks are starting, or it
// runs without --hang-timeout) node 0 decides nothing: no hang is ever called on missing
// news.
//
// On a hang node 0 gathers every node's stacks (dump_exchange.h) and, with --on-hang stop or
// restart, ends the epoch with a stop marker of kind `hang` (HangMarker) naming the ranks whose
// stacks differ from the majority of the job.
//
// Thread safety: pure functions over values.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "launcher/cluster/job_protocol.h"
#include "launcher/ops/hang_check.h"
#include "launcher/ops/stack_report.h"

namespace gculaunch::job {

/// The period of the progress reports and of node 0's checks for a --hang-timeout in a job of
/// `nodes` nodes: a tenth of the timeout, between 100 and 500 ms; in a large job at least
/// nodes / kReportsPerSecond seconds, so that node 0 hears at most that many reports a second
/// (16k nodes: 4.1 s), but never more than a quarter of the timeout (a report's staleness
/// makes a node look quieter by up to one period).
inline constexpr double kReportsPerSecond = 4000;
std::chrono::milliseconds HangCheckPeriod(double timeout_s, int nodes = 1);

/// One node's progress report (job/progress/<k>).
struct NodeProgress {
  int node = 0;
  int epoch = 0;
  long long seq = 0;     ///< grows with every report: a report that changed is a new one
  double timeout_s = 0;  ///< the node's own --hang-timeout, for node 0's warnings
  std::vector<RankProgress> ranks;
};

std::string Encode(const NodeProgress& report);
/// Errors name the field ("progress report field 'epoch': expected a whole number").
Result<NodeProgress> DecodeProgress(std::string_view text);

/// A node's latest report as node 0 holds it: decoded, and seen `seen_age_s` ago.
struct SeenProgress {
  int node = 0;
  std::optional<NodeProgress> report;  ///< none: the node never reported (or unreadably)
  double seen_age_s = 0;
};

struct JobHangCheck {
  HangVerdict verdict;              ///< meaningful only when `unreported` is empty
  std::vector<int> unreported;      ///< nodes with no report for `epoch`: nothing decided
  std::vector<RankProgress> ranks;  ///< the whole job's ranks, as judged
};

/// Node 0's decision for `epoch`: its own ranks' progress `own` and every other node's latest
/// report.  REQUIRES: 0 < timeout_s <= grace_s.
JobHangCheck CheckJobHang(int epoch, const std::vector<RankProgress>& own,
                          const std::vector<SeenProgress>& others, double timeout_s,
                          double grace_s);

/// The `hang` stop marker of `epoch`: `why` (the verdict), then each rank whose stacks differ
/// from the job's majority with its node and the function it is in; the first such rank is
/// the marker's rank and node.  `restarts`: the restarts the job had used when `epoch` started
/// (the budget, job_protocol.h RestartsOf).  `restart`: --on-hang restart (restartable).
StopMarker HangMarker(int epoch, int restarts, const std::string& why,
                      const std::vector<NodeStacks>& parts, bool restart);

}  // namespace gculaunch::job
