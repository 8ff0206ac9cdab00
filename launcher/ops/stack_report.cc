#include "launcher/ops/stack_report.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

namespace gculaunch {
namespace {

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// `  File "x.py", line 12 in f` -> frame; false for any other line.
bool ParseFrame(const std::string& line, StackFrame* frame) {
  const std::string head = "  File \"";
  if (!StartsWith(line, head)) return false;
  const size_t quote = line.find("\", line ", head.size());
  if (quote == std::string::npos) return false;
  const size_t in = line.find(" in ", quote);
  if (in == std::string::npos) return false;
  frame->file = line.substr(head.size(), quote - head.size());
  const std::string number = line.substr(quote + 8, in - quote - 8);
  const bool digits =
      !number.empty() && number.size() < 9 &&
      std::all_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; });
  frame->line = digits ? std::stoi(number) : 0;
  frame->function = line.substr(in + 4);
  return true;
}

std::vector<std::vector<StackFrame>> Threads(const std::string& dump) {
  std::vector<std::vector<StackFrame>> threads;
  std::istringstream in(dump);
  std::string line;
  while (std::getline(in, line)) {
    if (StartsWith(line, "Thread 0x") || StartsWith(line, "Current thread 0x") ||
        StartsWith(line, "Stack (most recent call first)")) {
      threads.emplace_back();
      continue;
    }
    StackFrame frame;
    if (ParseFrame(line, &frame)) {
      if (threads.empty()) threads.emplace_back();
      threads.back().push_back(std::move(frame));
    }
  }
  return threads;
}

std::string Signature(const std::vector<StackFrame>& frames) {
  std::string sig;
  for (const StackFrame& f : frames) sig += f.file + ":" + f.function + "\n";
  return sig;
}

}  // namespace

std::vector<StackFrame> MainThreadFrames(const std::string& dump) {
  std::vector<std::vector<StackFrame>> threads = Threads(dump);
  for (auto& frames : threads) {
    if (!frames.empty() && frames.back().function == "<module>") return std::move(frames);
  }
  for (auto& frames : threads) {
    if (!frames.empty()) return std::move(frames);
  }
  return {};
}

std::vector<int> OddRanks(const std::vector<StackDump>& dumps) {
  std::map<std::string, int> count;
  std::vector<std::pair<int, std::string>> sigs;
  for (const StackDump& d : dumps) {
    if (!d.ok) continue;
    sigs.emplace_back(d.rank, Signature(MainThreadFrames(d.text)));
    ++count[sigs.back().second];
  }
  if (sigs.size() < 3) return {};
  int best = 0;
  int runner_up = 0;
  std::string majority;
  for (const auto& [sig, n] : count) {
    if (n > best) {
      runner_up = best;
      best = n;
      majority = sig;
    } else if (n > runner_up) {
      runner_up = n;
    }
  }
  if (best == runner_up) return {};
  std::vector<int> odd;
  for (const auto& [rank, sig] : sigs) {
    if (sig != majority) odd.push_back(rank);
  }
  return odd;
}

bool AllDumpedForTest(const std::vector<StackDump>& dumps) {
  return std::all_of(dumps.begin(), dumps.end(), [](const StackDump& d) { return d.ok; });
}

namespace {

// Per rank a header and its dump (or why there is none).
std::string FormatRankDumps(const std::vector<StackDump>& dumps) {
  std::string out;
  for (const StackDump& d : dumps) {
    const std::string who = "rank " + std::to_string(d.rank) + " (local rank " +
                            std::to_string(d.local_rank) +
                            (d.pid > 0 ? ", pid " + std::to_string(d.pid) : "") + ")";
    if (!d.ok) {
      out += "---- " + who + ": not dumped: " + d.why + " ----\n";
      continue;
    }
    out += "---- " + who + " ----\n" + d.text;
    if (!d.text.empty() && d.text.back() != '\n') out += "\n";
  }
  return out;
}

// The ranks that differ from the majority, or that every dumped rank is in the same place.
std::string FormatOddRanks(const std::vector<StackDump>& dumps) {
  std::string out;
  const std::vector<int> odd = OddRanks(dumps);
  for (const int rank : odd) {
    for (const StackDump& d : dumps) {
      if (d.rank != rank) continue;
      const std::vector<StackFrame> frames = MainThreadFrames(d.text);
      out += "rank " + std::to_string(rank) + " differs from the majority";
      if (!frames.empty()) {
        out += ": in " + frames.front().function + " (" + frames.front().file + ":" +
               std::to_string(frames.front().line) + ")";
      }
      out += "\n";
    }
  }
  std::vector<std::string> sigs;
  for (const StackDump& d : dumps) {
    if (d.ok) sigs.push_back(Signature(MainThreadFrames(d.text)));
  }
  if (sigs.size() >= 2 && std::all_of(sigs.begin(), sigs.end(),
                                      [&](const std::string& s) { return s == sigs.front(); })) {
    out += "every dumped rank is in the same place\n";
  }
  return out;
}

}  // namespace

std::string FormatStackReport(const std::string& title, const std::vector<StackDump>& dumps) {
  return title + "\n" + FormatRankDumps(dumps) + FormatOddRanks(dumps);
}

std::string FormatJobStackReport(const std::vector<NodeStacks>& nodes) {
  std::string out;
  std::vector<StackDump> all;
  for (const NodeStacks& node : nodes) {
    out += (out.empty() ? "" : "gculaunch: ") + node.title + "\n";
    if (!node.missing.empty()) {
      out += "---- node " + std::to_string(node.node_rank) + ": not dumped: " + node.missing +
             " ----\n";
      continue;
    }
    out += FormatRankDumps(node.dumps);
    all.insert(all.end(), node.dumps.begin(), node.dumps.end());
  }
  return out + FormatOddRanks(all);
}

std::string EncodeNodeStacks(const NodeStacks& node) {
  nlohmann::json dumps = nlohmann::json::array();
  for (const StackDump& d : node.dumps) {
    dumps.push_back({{"local_rank", d.local_rank},
                     {"rank", d.rank},
                     {"pid", d.pid},
                     {"ok", d.ok},
                     {"text", d.text},
                     {"why", d.why}});
  }
  const nlohmann::json doc = {
      {"node_rank", node.node_rank}, {"title", node.title}, {"dumps", dumps}};
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<NodeStacks> DecodeNodeStacks(const std::string& text) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("dumps") ||
      !doc["dumps"].is_array()) {
    return Error{"a node's stack dump is not valid JSON", "run the same gculaunch on every node"};
  }
  NodeStacks node;
  node.node_rank = doc.value("node_rank", -1);
  node.title = doc.value("title", "");
  for (const nlohmann::json& d : doc["dumps"]) {
    if (!d.is_object()) continue;
    StackDump dump;
    dump.local_rank = d.value("local_rank", 0);
    dump.rank = d.value("rank", 0);
    dump.pid = d.value("pid", -1);
    dump.ok = d.value("ok", false);
    dump.text = d.value("text", "");
    dump.why = d.value("why", "");
    node.dumps.push_back(std::move(dump));
  }
  return node;
}

}  // namespace gculaunch
