#include "launcher/frontend/device_health.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>

#include "base/text.h"

namespace gculaunch {
namespace {

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = Trim(text.substr(start, end - start));
    if (!line.empty()) lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

std::vector<std::string> SplitCommas(const std::string& line) {
  std::vector<std::string> out = Split(line, ',');
  for (std::string& value : out) value = Trim(value);
  return out;
}

std::string FirstLine(const std::string& text) {
  auto lines = SplitLines(text);
  return lines.empty() ? "" : lines.front();
}

// "[N/A]", "[Not Supported]", "N/A": the tool cannot tell (not on this card, MIG, Hopper's
// retired pages); the field is not checked.
bool Unknown(const std::string& value) {
  return value.empty() || value.front() == '[' || Lower(value) == "n/a";
}

// Whether `value` breaks `rule` ("above N", or a value); nullopt: the value is not a number
// where one was expected (not judged).
std::optional<bool> Breaks(const std::string& rule, const std::string& value) {
  static const std::string kAbove = "above ";
  if (rule.rfind(kAbove, 0) != 0) return Lower(value) == Lower(rule);
  const std::string limit = rule.substr(kAbove.size());
  const auto number = ParseInteger(value);
  const auto bound = ParseInteger(limit);
  if (!number || !bound) return std::nullopt;
  return *number > *bound;
}

// Each card's findings, by card, in the order the cards first appear.
struct Findings {
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> bad;  ///< card -> "says (field = value)"
  std::vector<std::string> answered;                    ///< cards with at least one row
  std::vector<std::string> unchecked;                   ///< "field (why)"
  std::vector<std::string> lost_lines;                  ///< the tool's "lost" lines
  bool hung = false;
  std::string hang_what;
};

void NoteCard(Findings& f, const std::string& card) {
  if (std::find(f.answered.begin(), f.answered.end(), card) == f.answered.end()) {
    f.answered.push_back(card);
  }
}

void NoteUnchecked(Findings& f, const std::string& what) {
  if (std::find(f.unchecked.begin(), f.unchecked.end(), what) == f.unchecked.end()) {
    f.unchecked.push_back(what);
  }
}

const HealthField* FieldNamed(const HealthToolSpec& tool, const std::string& name) {
  for (const HealthField& field : tool.fields) {
    if (field.name == name) return &field;
  }
  return nullptr;
}

void JudgeRow(const HealthToolSpec& tool, const HealthQuery& query,
              const std::vector<std::string>& values, Findings& f) {
  const std::string& card = values.front();
  NoteCard(f, card);
  for (size_t i = 1; i < values.size() && i < query.fields.size(); ++i) {
    const HealthField* field = FieldNamed(tool, query.fields[i]);
    if (field == nullptr) continue;
    if (Unknown(values[i])) {
      NoteUnchecked(f, field->name + " (" + values[i] + ")");
      continue;
    }
    const auto broken = Breaks(field->unhealthy, values[i]);
    if (!broken) {
      NoteUnchecked(f, field->name + " (not a number: " + values[i] + ")");
    } else if (*broken) {
      f.bad[card].push_back(field->says + " (" + field->name + " = " + values[i] + ")");
    }
  }
}

bool SaysLost(const HealthToolSpec& tool, const std::string& line) {
  return std::any_of(tool.lost.begin(), tool.lost.end(), [&](const std::string& needle) {
    return !needle.empty() && Lower(line).find(Lower(needle)) != std::string::npos;
  });
}

void ReadRun(const HealthToolSpec& tool, const HealthQuery& query, const HealthRun& run,
             const std::vector<std::string>& cards, Findings& f) {
  if (run.kind == HealthRun::Kind::kTimedOut) {
    f.hung = true;
    f.hang_what =
        "still running after " + Seconds(std::chrono::duration<double>(run.timeout_s)) + "; killed";
    return;
  }
  bool lost_said = false;
  for (const std::string& line : SplitLines(run.out + "\n" + run.err)) {
    if (SaysLost(tool, line)) {
      f.lost_lines.push_back(line);
      lost_said = true;
    }
  }
  if (run.kind != HealthRun::Kind::kExited || (run.code != 0 && !lost_said)) {
    const std::string why =
        run.kind == HealthRun::Kind::kSignaled ? "killed by signal " + std::to_string(run.code)
        : run.kind == HealthRun::Kind::kExited ? "exit code " + std::to_string(run.code)
                                               : run.err;
    const std::string said = FirstLine(run.err.empty() ? run.out : run.err);
    for (size_t i = 1; i < query.fields.size(); ++i) {
      NoteUnchecked(f, query.fields[i] + " (" + why + (said.empty() ? "" : ": " + said) + ")");
    }
    return;
  }
  for (const std::string& line : SplitLines(run.out)) {
    if (SaysLost(tool, line)) continue;
    auto values = SplitCommas(line);
    if (values.size() != query.fields.size() || values.front().empty()) continue;
    // Cards outside this node's pool (another launcher's, CUDA_VISIBLE_DEVICES) are not ours.
    if (!cards.empty() && std::find(cards.begin(), cards.end(), values.front()) == cards.end()) {
      continue;
    }
    JudgeRow(tool, query, values, f);
  }
}

HealthRow RowFrom(const HealthToolSpec& tool, const Findings& f,
                  const std::vector<std::string>& cards) {
  HealthRow row{tool.tool};
  if (f.hung) {
    row.verdict = HealthVerdict::kUnhealthy;
    row.cards = cards;
    row.reason = "the tool hung (" + f.hang_what + "): every card counts as unhealthy";
    return row;
  }
  std::vector<std::string> parts;
  for (const std::string& card : f.answered) {
    auto bad = f.bad.find(card);
    if (bad == f.bad.end()) continue;
    row.cards.push_back(card);
    parts.push_back("card " + card + ": " + Join(bad->second, ", "));
  }
  if (!f.lost_lines.empty()) {
    for (const std::string& card : cards) {
      if (std::find(f.answered.begin(), f.answered.end(), card) == f.answered.end()) {
        row.cards.push_back(card);
      }
    }
    parts.push_back("a card is lost: " + f.lost_lines.front());
  }
  if (!parts.empty()) {
    row.verdict = HealthVerdict::kUnhealthy;
    row.reason = Join(parts, "; ");
    return row;
  }
  row.cards = f.answered;
  if (f.answered.empty()) {
    row.verdict = HealthVerdict::kNotChecked;
    row.reason = f.unchecked.empty() ? "no card answered"
                                     : "no field could be read: " + Join(f.unchecked, ", ");
    return row;
  }
  std::vector<std::string> names;
  for (const HealthField& field : tool.fields) names.push_back(field.name);
  row.reason = "card" + std::string(f.answered.size() == 1 ? " " : "s ") + Join(f.answered, ",") +
               ": " + Join(names, ", ") + " fine";
  if (!f.unchecked.empty()) row.reason += "; not checked: " + Join(f.unchecked, ", ");
  return row;
}

}  // namespace

bool HealthReport::healthy() const {
  return std::none_of(rows.begin(), rows.end(),
                      [](const HealthRow& r) { return r.verdict == HealthVerdict::kUnhealthy; });
}

std::string HealthReport::Describe() const {
  std::vector<std::string> parts;
  for (const HealthRow& r : rows) {
    if (r.verdict == HealthVerdict::kUnhealthy) parts.push_back(r.check + ": " + r.reason);
  }
  return Join(parts, "; ");
}

std::vector<std::string> HealthReport::UnhealthyCards() const {
  std::vector<std::string> out;
  for (const HealthRow& r : rows) {
    if (r.verdict != HealthVerdict::kUnhealthy) continue;
    for (const std::string& card : r.cards) {
      if (std::find(out.begin(), out.end(), card) == out.end()) out.push_back(card);
    }
  }
  return out;
}

HealthQuery HealthFullQuery(const HealthToolSpec& tool) {
  HealthQuery q;
  q.fields.push_back(tool.index_field);
  for (const HealthField& field : tool.fields) q.fields.push_back(field.name);
  const std::string joined = Join(q.fields, ",");
  for (std::string arg : tool.args) {
    const size_t at = arg.find("{fields}");
    if (at != std::string::npos) arg.replace(at, 8, joined);
    q.args.push_back(std::move(arg));
  }
  return q;
}

HealthQuery HealthMemoryQuery(const HealthToolSpec& tool) {
  HealthToolSpec one = tool;
  one.fields = {HealthField{tool.memory->field, "", ""}};
  return HealthFullQuery(one);
}

namespace {

// "3000", "3000 MiB": the number of MiB; nullopt: not a number in MiB.
std::optional<int64_t> ParseMib(const std::string& value) {
  std::string number = value;
  const size_t space = number.find(' ');
  if (space != std::string::npos) {
    if (Lower(Trim(number.substr(space))) != "mib") return std::nullopt;
    number = number.substr(0, space);
  }
  const auto mib = ParseInteger(number);
  if (!mib || *mib < 0) return std::nullopt;
  return static_cast<int64_t>(*mib);
}

bool InPool(const std::vector<std::string>& cards, const std::string& card) {
  return cards.empty() || std::find(cards.begin(), cards.end(), card) != cards.end();
}

}  // namespace

Result<std::vector<HeldMemory>> JudgeHealthMemory(const HealthToolSpec& tool, const HealthRun& run,
                                                  const std::vector<std::string>& cards) {
  const std::string& field = tool.memory->field;
  if (run.kind != HealthRun::Kind::kExited || run.code != 0) {
    const std::string said = FirstLine(run.err.empty() ? run.out : run.err);
    const std::string why =
        run.kind == HealthRun::Kind::kExited     ? "exit code " + std::to_string(run.code)
        : run.kind == HealthRun::Kind::kTimedOut ? "timed out"
        : run.kind == HealthRun::Kind::kSignaled ? "killed by signal " + std::to_string(run.code)
                                                 : run.err;
    return Error{tool.tool + " could not tell " + field + " (" + why +
                     (said.empty() || run.kind == HealthRun::Kind::kFailed ? "" : ": " + said) +
                     ")",
                 "see the health check's rows in gculaunch check"};
  }
  std::vector<HeldMemory> held;
  bool read_any = false;
  for (const std::string& line : SplitLines(run.out)) {
    const auto values = SplitCommas(line);
    if (values.size() != 2 || values.front().empty()) continue;
    if (Unknown(values[1])) {
      read_any = true;
      continue;
    }
    const auto mib = ParseMib(values[1]);
    if (!mib) continue;
    read_any = true;
    if (InPool(cards, values[0]) && *mib >= tool.memory->below_mib) {
      held.push_back(HeldMemory{values[0], *mib});
    }
  }
  if (!read_any) {
    return Error{
        tool.tool + " printed no readable " + field + " row ('" + FirstLine(run.out) + "')",
        "check the profile's health.memory.field"};
  }
  return held;
}

std::string DescribeHeldMemory(const std::vector<HeldMemory>& held) {
  std::vector<std::string> parts;
  parts.reserve(held.size());
  for (const HeldMemory& h : held)
    parts.push_back("card " + h.card + ": " + std::to_string(h.mib) + " MiB");
  return Join(parts, ", ");
}

std::vector<HealthQuery> HealthFieldQueries(const HealthToolSpec& tool) {
  std::vector<HealthQuery> out;
  for (const HealthField& field : tool.fields) {
    HealthToolSpec one = tool;
    one.fields = {field};
    out.push_back(HealthFullQuery(one));
  }
  return out;
}

bool HealthNeedsFallback(const HealthToolSpec& tool, const HealthRun& run) {
  if (run.kind != HealthRun::Kind::kExited || run.code == 0 || tool.fields.size() < 2) {
    return false;
  }
  for (const std::string& line : SplitLines(run.out + "\n" + run.err)) {
    if (SaysLost(tool, line)) return false;
  }
  return true;
}

HealthRow JudgeHealthTool(const HealthToolSpec& tool, const std::vector<HealthQuery>& queries,
                          const std::vector<HealthRun>& runs,
                          const std::vector<std::string>& cards) {
  Findings f;
  for (size_t i = 0; i < queries.size() && i < runs.size(); ++i) {
    ReadRun(tool, queries[i], runs[i], cards, f);
  }
  return RowFrom(tool, f, cards);
}

HealthRow HealthToolMissing(const HealthToolSpec& tool, const std::string& path_var) {
  HealthRow row{tool.tool, HealthVerdict::kNotChecked};
  row.reason = tool.tool + " is not installed (not found on PATH" +
               std::string(path_var.empty() ? ", which is empty" : "") + ")";
  return row;
}

std::vector<HealthRow> JudgeBuiltinHealth(const DeviceProfile& profile, const DeviceProbe& probe,
                                          const std::vector<std::string>& device_ids,
                                          const std::vector<std::string>& cards) {
  std::vector<HealthRow> rows;
  if (!profile.has_devices()) return rows;
  HealthRow files{"device files"};
  std::vector<std::string> present;
  for (const DeviceFile& d : probe.FindDevices(profile)) present.push_back(d.id);
  std::vector<std::string> gone;
  for (const std::string& id : device_ids) {
    if (std::find(present.begin(), present.end(), id) == present.end()) gone.push_back(id);
  }
  if (gone.empty()) {
    files.cards = cards;
    files.reason = std::to_string(device_ids.size()) + " present in " + profile.device_dir;
  } else {
    // Device files are numbered by minor, the pool by index; which index went is not known.
    files.verdict = HealthVerdict::kUnhealthy;
    files.cards = gone;
    files.reason = "device file" + std::string(gone.size() == 1 ? " " : "s ") + Join(gone, ",") +
                   " gone from " + profile.device_dir +
                   " since gculaunch started (the card left the bus, or its driver unloaded)";
  }
  rows.push_back(std::move(files));
  if (!profile.driver_path.empty()) {
    HealthRow driver{"driver"};
    if (probe.Exists(profile.driver_path)) {
      driver.reason = profile.driver_path + " exists";
    } else {
      driver.verdict = HealthVerdict::kUnhealthy;
      driver.cards = cards;
      driver.reason = "the driver is not loaded (" + profile.driver_path + " is missing)";
    }
    rows.push_back(std::move(driver));
  }
  return rows;
}

HealthRow JudgeHealthCommand(const std::string& command, const HealthRun& run,
                             const std::vector<std::string>& cards) {
  HealthRow row{"--health-check"};
  const std::string said = FirstLine(run.out).empty() ? FirstLine(run.err) : FirstLine(run.out);
  switch (run.kind) {
    case HealthRun::Kind::kExited:
      if (run.code == 0) {
        row.reason = command + " exited 0" + (said.empty() ? "" : ": " + said);
        return row;
      }
      row.reason =
          command + " exited " + std::to_string(run.code) + (said.empty() ? "" : ": " + said);
      break;
    case HealthRun::Kind::kSignaled:
      row.reason = command + " was killed by signal " + std::to_string(run.code);
      break;
    case HealthRun::Kind::kTimedOut:
      row.reason = command + " still ran after " +
                   Seconds(std::chrono::duration<double>(run.timeout_s)) +
                   " (--health-check-timeout); killed";
      break;
    case HealthRun::Kind::kMissing:
    case HealthRun::Kind::kFailed:
      row.reason = command + " could not be run: " + run.err;
      break;
  }
  row.verdict = HealthVerdict::kUnhealthy;
  row.cards = cards;
  return row;
}

}  // namespace gculaunch
