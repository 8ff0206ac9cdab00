// CheckHang: is the attempt hung?  A pure function of how long ago each rank showed progress
// (--hang-timeout; docs/command-line.md, section --hang-timeout).
//
// Progress is job-wide: any rank's output (a line, a carriage-return update, any bytes read
// from its pipes), or a touch of its GCULAUNCH_HEARTBEAT_FILE.  When a collective hangs,
// every rank stops progressing, so silence of the whole job for `timeout` is a hang.  Before
// the attempt's first progress the start-up grace applies instead (import torch, data
// loading).  A rank whose own heartbeat stopped for `timeout` while another rank's heartbeat
// is fresh is a hang by itself, even while others still print.
//
// Thread safety: pure function.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/frontend/types.h"
#include "launcher/run/rank_record.h"

namespace gculaunch {

struct HangVerdict {
  bool hang = false;
  /// Ranks flagged by themselves: their heartbeat stopped while another rank's beats.
  std::vector<int> silent_ranks;
  /// One sentence: "no progress from any rank for 3.2 s (--hang-timeout 3 s)".
  std::string why;
  /// How long the job (or, for flagged ranks, the quietest of them) has been silent.
  double silent_s = 0;
};

/// "stop", "restart", "report": the --on-hang value as typed.
const char* OnHangName(OnHang on_hang);

/// REQUIRES: 0 < timeout_s <= grace_s.  No running rank: never a hang.
HangVerdict CheckHang(const std::vector<RankProgress>& ranks, double timeout_s, double grace_s);

}  // namespace gculaunch
