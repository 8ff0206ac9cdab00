// The stack report: every rank's dump in one text, and the ranks whose stacks differ from
// the majority (in a hung collective, the stuck rank is usually the one that is not inside
// it).  Pure functions of StackDumps (stack_dumper.h).
//
// A dump is faulthandler's text: per thread a line "Thread 0x... (most recent call first):"
// or "Current thread 0x... (most recent call first):", then one line per frame,
// `  File "<path>", line <n> in <function>`, innermost first.  A rank's signature is the
// frames of its main thread (the thread whose outermost frame is "<module>"; else its first
// thread) as "<path>:<function>" without line numbers, so that the same loop at another
// iteration, or another data item, still compares equal.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "base/error.h"
#include "launcher/ops/stack_dumper.h"

namespace gculaunch {

/// One frame of a dump.
struct StackFrame {
  std::string file;
  int line = 0;
  std::string function;
};

/// The frames of the main thread of a faulthandler dump, innermost first; empty when the
/// text holds no frame.
std::vector<StackFrame> MainThreadFrames(const std::string& dump);

/// The ranks (global) whose main-thread signature differs from the most common one among
/// the dumped ranks.  Empty when fewer than three ranks were dumped or no signature is
/// shared by more ranks than any other (no majority to differ from).
std::vector<int> OddRanks(const std::vector<StackDump>& dumps);

/// The report: a title line, then per rank a header "---- rank R (local rank L, pid P) ----"
/// and its dump, or "---- rank R (local rank L): not dumped: <why> ----"; then a line naming
/// the odd ranks and the function each is in ("rank 1 differs from the majority: in
/// stuck (train.py:12)"), or that every dumped rank is in the same place.
std::string FormatStackReport(const std::string& title, const std::vector<StackDump>& dumps);

/// One node's part of a job's stacks (node 0 gathers them, launcher/cluster/dump_exchange.h).
struct NodeStacks {
  int node_rank = 0;
  std::string title;  ///< "stacks of run R, node N (host), gculaunch pid P"
  std::vector<StackDump> dumps;
  std::string missing;  ///< non-empty: why this node has no part ("no answer within 20 s")
};

/// Every node's part in turn (its title, its ranks, or why it is missing; the titles after
/// the first start with "gculaunch: "), then the ranks that differ from the majority of the
/// whole job.
std::string FormatJobStackReport(const std::vector<NodeStacks>& nodes);

/// A node's part as one JSON text (for the job board) and back.
std::string EncodeNodeStacks(const NodeStacks& node);
Result<NodeStacks> DecodeNodeStacks(const std::string& text);

/// True when every rank was dumped.
bool AllDumpedForTest(const std::vector<StackDump>& dumps);

}  // namespace gculaunch
