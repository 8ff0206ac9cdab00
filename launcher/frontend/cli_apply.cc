// The apply functions of the flag table (cli.cc) and the value parsers they share: every
// value a flag takes, from the command line, PET_* or a job file, is checked here
// (cli_apply.h).
#include "launcher/frontend/cli_apply.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <set>

#include "base/duration.h"
#include "base/text.h"
#include "launcher/frontend/device_profile.h"
#include "launcher/frontend/etcd_settings.h"

namespace gculaunch::cli_flags {

std::string PetName(std::string_view name) {
  std::string out = "PET_";
  for (char c : name) out += c == '-' ? '_' : static_cast<char>(std::toupper(c));
  return out;
}

std::string Underscored(std::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

// "--nnodes 4", "PET_NNODES=4" or, for a job file's "job.yaml:3: nnodes",
// "nnodes: 4": how to write `value` for this source.
std::string Example(const std::string& source, const std::string& value) {
  if (source.rfind("PET_", 0) == 0) return source + "=" + value;
  if (source.rfind("--", 0) == 0) return source + " " + value;
  const size_t key = source.rfind(": ");
  return (key == std::string::npos ? source : source.substr(key + 2)) + ": " + value;
}

Error BadValue(const std::string& source, const std::string& value, const std::string& problem,
               const std::string& example) {
  return Error{source + " '" + value + "': " + problem, "e.g. " + Example(source, example)};
}

std::optional<int> ParseIntIn(const std::string& text, long long min, long long max) {
  auto value = ParseInteger(text);
  if (!value || *value < min || *value > max) return std::nullopt;
  return static_cast<int>(*value);
}

// Whether `text` is a whole number above `max`, even one too long for a long long: the
// message then names the limit instead of calling it "not a number".
bool IntegerAbove(const std::string& text, long long max) {
  if (auto value = ParseInteger(text)) return *value > max;
  return !text.empty() && std::all_of(text.begin(), text.end(),
                                      [](unsigned char c) { return std::isdigit(c) != 0; });
}

// A whole number min..max for `source`; `problem` says what is expected otherwise, and a
// number above max gets "at most MAX" (the limits are in docs/command-line.md).
Result<int> ParseCount(const std::string& source, const std::string& value, long long min,
                       long long max, const std::string& problem, const std::string& example) {
  if (auto n = ParseIntIn(value, min, max)) return *n;
  if (IntegerAbove(value, max)) {
    return BadValue(source, value, "at most " + std::to_string(max), example);
  }
  return BadValue(source, value, problem, example);
}

// Seconds >= 0 (finite).  The callers hold the value to kMaxSeconds (CheckSeconds).
std::optional<double> ParseSeconds(const std::string& text) {
  double value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value) || value < 0) {
    return std::nullopt;
  }
  return value;
}

// A duration: a number of seconds, or a number with ms, s, m or h ("3s", "1.5m", "500ms").
std::optional<double> ParseDuration(const std::string& text) {
  static const std::vector<std::pair<std::string, double>> kUnits = {
      {"ms", 0.001}, {"s", 1}, {"m", 60}, {"h", 3600}};
  for (const auto& [unit, scale] : kUnits) {
    if (text.size() > unit.size() &&
        text.compare(text.size() - unit.size(), unit.size(), unit) == 0) {
      const std::string number = text.substr(0, text.size() - unit.size());
      if (!number.empty() && std::isalpha(static_cast<unsigned char>(number.back())) != 0) continue;
      auto value = ParseSeconds(number);
      if (!value) return std::nullopt;
      return *value * scale;
    }
  }
  return ParseSeconds(text);
}

// The one message for a duration above kMaxSeconds (base/duration.h).
constexpr const char* kTooLong = "at most 10000000 seconds (about 115 days)";

// A parsed duration `seconds` (nullopt: not a duration) for `source`: nullopt when it is one
// and within kMaxSeconds, else the error (`problem` for a malformed one).
std::optional<Error> CheckSeconds(const std::string& source, const std::string& value,
                                  std::optional<double> seconds, bool positive,
                                  const std::string& problem, const std::string& example) {
  if (!seconds || (positive && *seconds <= 0)) return BadValue(source, value, problem, example);
  if (*seconds > kMaxSeconds) return BadValue(source, value, kTooLong, example);
  return std::nullopt;
}

bool HasSpace(const std::string& text) {
  return std::any_of(text.begin(), text.end(),
                     [](unsigned char c) { return std::isspace(c) != 0; });
}

bool IsRunId(const std::string& id) {
  return !id.empty() && std::all_of(id.begin(), id.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '.' || c == '_' || c == '-';
  });
}

// torchrun's boolean PET_ variables are integers (non-zero = on); true/false
// are accepted too because platforms write them.
std::optional<bool> ParseBoolText(const std::string& text) {
  const std::string lower = Lower(text);
  if (lower == "true") return true;
  if (lower == "false") return false;
  if (auto value = ParseInteger(text)) return *value != 0;
  return std::nullopt;
}

std::optional<bool> ParseRdzvBool(const std::string& text) {
  const std::string lower = Lower(text);
  for (const char* yes : {"1", "true", "t", "yes", "y"}) {
    if (lower == yes) return true;
  }
  for (const char* no : {"0", "false", "f", "no", "n"}) {
    if (lower == no) return false;
  }
  return std::nullopt;
}

Result<int> ParsePort(const std::string& source, const std::string& value) {
  auto port = ParseIntIn(value, 0, 65535);
  if (!port) return BadValue(source, value, "expected a port number 0-65535", "29500");
  return *port;
}

Result<StdStreams> ParseStdStreams(const std::string& source, const std::string& value) {
  const std::string problem = "expected 0-3 or LOCAL_RANK:0-3,... (1 stdout, 2 stderr, 3 both)";
  StdStreams streams;
  if (auto all = ParseIntIn(value, 0, 3)) {
    streams.all = *all;
    return streams;
  }
  for (const std::string& item : Split(value, ',')) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos) return BadValue(source, value, problem, "3");
    auto rank = ParseIntIn(item.substr(0, colon), 0, kMaxLocalRank);
    auto bits = ParseIntIn(item.substr(colon + 1), 0, 3);
    if (IntegerAbove(item.substr(0, colon), kMaxLocalRank)) {
      return BadValue(source, value, "a local rank is at most " + std::to_string(kMaxLocalRank),
                      "0:3,1:2");
    }
    if (!rank || !bits) return BadValue(source, value, problem, "0:3,1:2");
    if (!streams.per_rank.emplace(*rank, *bits).second) {
      return BadValue(source, value, "local rank " + std::to_string(*rank) + " is listed twice",
                      "0:3,1:2");
    }
  }
  return streams;
}

Result<Endpoint> ParseEndpoint(const std::string& source, const std::string& value) {
  const std::string problem = "expected HOST:PORT or [IPv6]:PORT";
  Endpoint endpoint;
  std::string port_text;
  if (!value.empty() && value[0] == '[') {
    const size_t close = value.find(']');
    if (close == std::string::npos || close == 1) {
      return BadValue(source, value, problem, "[fd00::1]:29400");
    }
    endpoint.host = value.substr(1, close - 1);
    const std::string rest = value.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return BadValue(source, value, problem, "[fd00::1]:29400");
      port_text = rest.substr(1);
      if (port_text.empty()) return BadValue(source, value, problem, "[fd00::1]:29400");
    }
  } else {
    const size_t colon = value.find(':');
    if (colon != std::string::npos && value.find(':', colon + 1) != std::string::npos) {
      return BadValue(source, value, "an IPv6 address needs brackets: [ADDR]:PORT",
                      "[fd00::1]:29400");
    }
    endpoint.host = value.substr(0, colon);
    if (colon != std::string::npos) {
      port_text = value.substr(colon + 1);
      if (port_text.empty()) return BadValue(source, value, problem, "node0:29400");
    }
  }
  if (endpoint.host.empty() || HasSpace(endpoint.host)) {
    return BadValue(source, value, problem, "node0:29400");
  }
  if (!port_text.empty()) {
    auto port = ParseIntIn(port_text, 0, 65535);
    if (!port) {
      return BadValue(source, value, "the port must be a number 0-65535", "node0:29400");
    }
    endpoint.port = *port;
  }
  return endpoint;
}

// ---- one apply function per flag, or per shape of flag: each checks the value and sets
// the flag's own field of CliOptions (cli_test.cc checks that every flag sets one) ----

Status ApplyNprocPerNode(const ApplyContext& c, CliOptions& o) {
  NprocPerNode n;
  if (c.value == "auto") {
    n.kind = NprocPerNode::Kind::kAuto;
  } else if (c.value == "gpu") {
    n.kind = NprocPerNode::Kind::kGpu;
  } else if (c.value == "cpu") {
    n.kind = NprocPerNode::Kind::kCpu;
  } else {
    auto count = ParseCount(c.source, c.value, 1, kMaxNprocPerNode,
                            "expected a positive number, auto, gpu or cpu", "8");
    if (!count.ok()) return count.error();
    n.count = *count;
  }
  o.nproc_per_node = n;
  return OkStatus();
}

Status ApplyNnodes(const ApplyContext& c, CliOptions& o) {
  const std::string& value = c.value;
  const size_t colon = value.find(':');
  const std::string problem = "expected N or MIN:MAX, positive numbers";
  if (colon == std::string::npos) {
    auto n = ParseCount(c.source, value, 1, kMaxNodes, problem, "2");
    if (!n.ok()) return n.error();
    o.nnodes = *n;
    return OkStatus();
  }
  auto min = ParseIntIn(value.substr(0, colon), 1, kMaxNodes);
  auto max = ParseIntIn(value.substr(colon + 1), 1, kMaxNodes);
  if (IntegerAbove(value.substr(0, colon), kMaxNodes) ||
      IntegerAbove(value.substr(colon + 1), kMaxNodes)) {
    return BadValue(c.source, value, "at most " + std::to_string(kMaxNodes) + " nodes", "2");
  }
  if (!min || !max) return BadValue(c.source, value, problem, "2");
  if (*min > *max) {
    return Error{c.source + " '" + value + "': MIN is above MAX",
                 "give MIN:MAX with MIN <= MAX, such as " +
                     Example(c.source, std::to_string(*max) + ":" + std::to_string(*min))};
  }
  o.nnodes = *max;  // N:N is --nnodes N exactly
  if (*min < *max) {
    o.min_nodes = *min;
  } else {
    o.min_nodes.reset();
  }
  return OkStatus();
}

// A count 0..max into `field`; `example` is the message's example value.
Status ApplyCount(const ApplyContext& c, long long max, const char* example,
                  std::optional<int>& field) {
  auto n = ParseCount(c.source, c.value, 0, max, "expected a number >= 0", example);
  if (!n.ok()) return n.error();
  field = *n;
  return OkStatus();
}

Status ApplyNodeRank(const ApplyContext& c, CliOptions& o) {
  return ApplyCount(c, kMaxNodes - 1, "0", o.node_rank);
}

Status ApplyMaxRestarts(const ApplyContext& c, CliOptions& o) {
  return ApplyCount(c, kMaxRestarts, "3", o.max_restarts);
}

Status ApplyMaxSameFailures(const ApplyContext& c, CliOptions& o) {
  return ApplyCount(c, kMaxRestarts, "3", o.max_same_failures);
}

// --restart-backoff INITIAL:MAX (seconds, 0 < INITIAL <= MAX <= kMaxSeconds), or 0 / off.
Status ApplyRestartBackoff(const ApplyContext& c, CliOptions& o) {
  if (c.value == "off" || c.value == "0") {
    o.restart_backoff = RestartBackoff{0, 0};
    return OkStatus();
  }
  const std::string problem = "expected INITIAL:MAX in seconds with 0 < INITIAL <= MAX, or off";
  const size_t colon = c.value.find(':');
  if (colon == std::string::npos) return BadValue(c.source, c.value, problem, "1:60");
  const auto initial = ParseSeconds(c.value.substr(0, colon));
  const auto max = ParseSeconds(c.value.substr(colon + 1));
  if (!initial || !max || *initial <= 0 || *max < *initial) {
    return BadValue(c.source, c.value, problem, "1:60");
  }
  if (*max > kMaxSeconds)
    return BadValue(c.source, c.value, std::string("MAX is ") + kTooLong, "1:60");
  o.restart_backoff = RestartBackoff{*initial, *max};
  return OkStatus();
}

// A host name or IP address (an IPv6 literal may come in brackets, which are dropped) into
// `field`; `example` is the hint's value.
Status ApplyHost(const ApplyContext& c, std::optional<std::string>& field, const char* example) {
  std::string addr = c.value;
  if (addr.size() > 2 && addr.front() == '[' && addr.back() == ']') {
    addr = addr.substr(1, addr.size() - 2);
  }
  if (addr.empty() || HasSpace(addr)) {
    return BadValue(c.source, c.value, "expected a host name or IP address", example);
  }
  field = addr;
  return OkStatus();
}

Status ApplyMasterAddr(const ApplyContext& c, CliOptions& o) {
  return ApplyHost(c, o.master_addr, "10.0.0.1");
}

Status ApplyRdzvEndpoint(const ApplyContext& c, CliOptions& o) {
  if (c.value.find(',') != std::string::npos || c.value.find("://") != std::string::npos) {
    // A list or a URL: etcd's endpoints, checked by MakeEtcdSettings (etcd_settings.h).
    o.rdzv_endpoint.reset();
    o.rdzv_endpoint_list = c.value;
    return OkStatus();
  }
  o.rdzv_endpoint_list.reset();
  auto endpoint = ParseEndpoint(c.source, c.value);
  if (!endpoint.ok()) return endpoint.error();
  o.rdzv_endpoint = *endpoint;
  return OkStatus();
}

Status ApplyRdzvBackend(const ApplyContext& c, CliOptions& o) {
  if (c.value != "static" && c.value != "c10d" && !IsEtcdBackend(c.value)) {
    return Error{c.source + " '" + c.value +
                     "': not supported (gculaunch accepts static and c10d, which behave the "
                     "same, and etcd or etcd-v2, its etcd v3 rendezvous)",
                 "use " + Example(c.source, "static") + " or drop it"};
  }
  o.rdzv_backend = c.value;
  return OkStatus();
}

// An error about one --rdzv-conf item quotes that item only, and never a password's value:
// the whole value would echo every secret in it to logs (docs/security.md).
Error BadRdzvItem(const ApplyContext& c, const std::string& key, const std::string& val,
                  const std::string& problem, const std::string& example) {
  return BadValue(c.source, key == "password" ? "password=<hidden>" : key + "=" + val, problem,
                  example);
}

const std::set<std::string>& RdzvSecondsKeys() {
  static const std::set<std::string> keys = {"timeout", "join_timeout", "last_call_timeout",
                                             "close_timeout", "read_timeout"};
  return keys;
}

bool IsRdzvKey(const std::string& key) {
  return RdzvSecondsKeys().count(key) != 0 || key == "is_host" || IsEtcdConfKey(key);
}

namespace {

// Every key --rdzv-conf acts on, for the guess at a misspelling.
constexpr const char* kRdzvConfKeyNames[] = {"timeout",       "join_timeout",  "last_call_timeout",
                                             "close_timeout", "read_timeout",  "is_host",
                                             "protocol",      "cacert",        "cert",
                                             "key",           "etcd_prefix",   "user",
                                             "password",      "password_file", "lease_ttl"};

}  // namespace

std::string UnknownRdzvConfKeys(const CliOptions& o) {
  std::vector<std::string> unknown;
  std::vector<std::string> guesses;
  for (const auto& [key, value] : o.rdzv_conf) {
    if (IsRdzvKey(key)) continue;
    unknown.push_back(key);
    // A misspelt key of ours is worth naming (its value, maybe a password, never is).
    for (const char* known : kRdzvConfKeyNames) {
      if (key.size() >= 4 && EditDistance(key, known) <= 2) {
        guesses.push_back(key + " for " + known);
      }
    }
  }
  if (unknown.empty()) return "";
  std::string line = o.Source("rdzv-conf") + ": " + (unknown.size() == 1 ? "key " : "keys ") +
                     Join(unknown, ", ") + (unknown.size() == 1 ? " is" : " are") +
                     " not gculaunch's and ignored, as torchrun's rendezvous ignores keys it "
                     "does not know";
  if (!guesses.empty()) line += " (a misspelling? " + Join(guesses, ", ") + ")";
  return line;
}

// One KEY=VALUE item of --rdzv-conf, checked; nullopt when it is fine.
std::optional<Error> CheckRdzvItem(const ApplyContext& c, const std::string& key,
                                   const std::string& val) {
  const auto& kSeconds = RdzvSecondsKeys();
  if (kSeconds.count(key) != 0) {
    if (!ParseSeconds(val)) {
      return BadRdzvItem(c, key, val, "'" + key + "' expects seconds", key + "=900");
    }
    if (*ParseSeconds(val) > kMaxSeconds) {
      return BadRdzvItem(c, key, val, "'" + key + "' is " + kTooLong, key + "=900");
    }
  } else if (key == "is_host") {
    if (!ParseRdzvBool(val)) {
      return BadRdzvItem(c, key, val, "'is_host' expects true or false", "is_host=true");
    }
  } else if (IsEtcdConfKey(key)) {
    if (auto bad = CheckEtcdConfValue(key, val)) {
      return BadRdzvItem(c, key, val, bad->problem, bad->example);
    }
  }
  // Any other key is accepted, as torchrun's backends ignore what they do not know (users'
  // lines carry overlap_timeout=600 and the like); MakeLaunchSpec warns once, naming the
  // keys and never their values (UnknownRdzvConfKeys).
  return std::nullopt;
}

Status ApplyRdzvConf(const ApplyContext& c, CliOptions& o) {
  o.rdzv_conf.clear();
  bool after_password = false;
  for (const std::string& item : Split(c.value, ',')) {
    const size_t eq = item.find('=');
    const bool malformed = eq == std::string::npos || eq == 0;
    if (after_password && (malformed || !IsRdzvKey(item.substr(0, eq)))) {
      // Most likely the rest of a password that holds ',' (or ',' and '='): never quoted.
      return Error{c.source +
                       ": an item after password= is not one of the keys: a misspelt key, or a "
                       "password holding ','",
                   "check the key names (--help lists them); put a password holding ',' in "
                   "password_file=PATH or in " +
                       std::string(kEtcdPasswordEnv)};
    }
    if (malformed) {
      return BadValue(c.source, item, "expected KEY=VALUE[,KEY=VALUE...]", "join_timeout=900");
    }
    const std::string key = item.substr(0, eq);
    const std::string val = item.substr(eq + 1);
    after_password = key == "password";
    if (auto bad = CheckRdzvItem(c, key, val)) return *bad;
    o.rdzv_conf[key] = val;
  }
  return OkStatus();
}

Status ApplyRdzvTimeout(const ApplyContext& c, CliOptions& o) {
  auto seconds = ParseSeconds(c.value);
  if (auto bad = CheckSeconds(c.source, c.value, seconds, true, "expected seconds (a number > 0)",
                              "900")) {
    return *bad;
  }
  o.rdzv_timeout = *seconds;
  return OkStatus();
}

// Heartbeats come every second, and half of the timeout is the shortest silence that loses
// a node: below 2 s a node that is merely busy for a moment would be lost.
Status ApplyNodeTimeout(const ApplyContext& c, CliOptions& o) {
  auto seconds = ParseSeconds(c.value);
  if (auto bad = CheckSeconds(c.source, c.value, seconds, true, "expected seconds (a number >= 2)",
                              "30")) {
    return *bad;
  }
  if (*seconds < 2) {
    return BadValue(c.source, c.value,
                    "at least 2 seconds (nodes heartbeat every second, and a node is lost after "
                    "half of this at the earliest)",
                    "30");
  }
  o.node_timeout = *seconds;
  return OkStatus();
}

Status ApplyOnHang(const ApplyContext& c, CliOptions& o) {
  if (c.value == "stop") {
    o.on_hang = OnHang::kStop;
  } else if (c.value == "restart") {
    o.on_hang = OnHang::kRestart;
  } else if (c.value == "report") {
    o.on_hang = OnHang::kReport;
  } else {
    return BadValue(c.source, c.value, "expected stop, restart or report", "stop");
  }
  return OkStatus();
}

Status ApplyExitCodes(const ApplyContext& c, CliOptions& o) {
  auto scheme = ExitSchemeNamed(c.value);
  if (!scheme) return BadValue(c.source, c.value, "expected rank or classes", "classes");
  o.exit_codes = *scheme;
  return OkStatus();
}

Status ApplyPlatformWorldSize(const ApplyContext& c, CliOptions& o) {
  if (c.value != "nodes" && c.value != "procs") {
    return BadValue(c.source, c.value, "expected nodes or procs", "procs");
  }
  o.platform_world_size =
      c.value == "nodes" ? PlatformWorldSize::kNodes : PlatformWorldSize::kProcs;
  return OkStatus();
}

Status ApplyRole(const ApplyContext& c, CliOptions& o) {
  if (c.value.empty() || HasSpace(c.value)) {
    return BadValue(c.source, c.value, "expected a name without spaces", "trainer");
  }
  o.role = c.value;
  return OkStatus();
}

Status ApplyLocalRanksFilter(const ApplyContext& c, CliOptions& o) {
  std::vector<int> ranks;
  for (const std::string& item : Split(c.value, ',')) {
    auto rank = ParseIntIn(item, 0, kMaxLocalRank);
    if (IntegerAbove(item, kMaxLocalRank)) {
      return BadValue(c.source, c.value, "a local rank is at most " + std::to_string(kMaxLocalRank),
                      "0");
    }
    if (!rank) return BadValue(c.source, c.value, "expected local ranks such as 0,1,2", "0");
    ranks.push_back(*rank);
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  o.local_ranks_filter = ranks;
  return OkStatus();
}

Status ApplyBind(const ApplyContext& c, CliOptions& o) {
  if (c.value != "all" && c.value != "rank") {
    return BadValue(c.source, c.value, "expected all or rank", "rank");
  }
  o.bind = c.value == "all" ? DeviceBind::kAll : DeviceBind::kRank;
  return OkStatus();
}

Status ApplyCpuAffinity(const ApplyContext& c, CliOptions& o) {
  if (c.value == "none") {
    o.cpu_affinity = CpuAffinity::kNone;
  } else if (c.value == "numa") {
    o.cpu_affinity = CpuAffinity::kNuma;
  } else if (c.value == "spread") {
    o.cpu_affinity = CpuAffinity::kSpread;
  } else {
    return BadValue(c.source, c.value, "expected none, numa or spread", "numa");
  }
  return OkStatus();
}

Status ApplyStdin(const ApplyContext& c, CliOptions& o) {
  if (c.value != "null" && c.value != "rank0") {
    return BadValue(c.source, c.value, "expected null or rank0", "rank0");
  }
  o.stdin_mode = c.value == "null" ? StdinMode::kNull : StdinMode::kRank0;
  return OkStatus();
}

Status ApplyFormat(const ApplyContext& c, CliOptions& o) {
  if (c.value == "table" || c.value == "text") {
    o.format = DryRunFormat::kTable;
  } else if (c.value == "json") {
    o.format = DryRunFormat::kJson;
  } else if (c.value == "env") {
    o.format = DryRunFormat::kEnv;
  } else {
    return BadValue(c.source, c.value, "expected table, json or env", "json");
  }
  return OkStatus();
}

// One KEY=VALUE of --env (repeatable: each item adds one).
Status ApplyEnv(const ApplyContext& c, CliOptions& o) {
  const std::string& item = c.value;
  const size_t eq = item.find('=');
  if (eq == std::string::npos) {
    return BadValue(c.source, item, "expected KEY=VALUE", "ECCL_DEBUG=INFO");
  }
  const std::string key = item.substr(0, eq);
  if (!IsEnvName(key)) {
    return Error{c.source + " '" + item + "': '" + key + "' is not a valid variable name",
                 "use letters, digits and '_', not starting with a digit"};
  }
  o.env.emplace_back(key, item.substr(eq + 1));
  return OkStatus();
}

// --start-method: torchrun's multiprocessing start method (kept for a note: ranks are
// always new processes here).
Status ApplyStartMethod(const ApplyContext& c, CliOptions& o) {
  if (c.value != "spawn" && c.value != "fork" && c.value != "forkserver") {
    return BadValue(c.source, c.value, "expected spawn, fork or forkserver", "spawn");
  }
  o.start_method = c.value;
  return OkStatus();
}

// --local-addr: this node's address as the other nodes see it.
Status ApplyLocalAddr(const ApplyContext& c, CliOptions& o) {
  return ApplyHost(c, o.local_addr, "10.0.0.2");
}

// --logs-specs: torchrun's plugin entry point; only its built-in "default" (what gculaunch
// does with --log-dir, --redirects and --tee) can be honoured.
Status ApplyLogsSpecs(const ApplyContext& c, CliOptions& o) {
  if (c.value != "default") {
    return Error{c.source + " '" + c.value +
                     "': gculaunch cannot load torchrun.logs_specs plugins; only 'default' "
                     "(torchrun's DefaultLogsSpecs) is supported",
                 "drop " + c.source + " and use --log-dir, --redirects and --tee"};
  }
  o.logs_specs = c.value;
  return OkStatus();
}

// --signals-to-handle SIGTERM,SIGINT,...: names as torchrun takes them.
Status ApplySignalsToHandle(const ApplyContext& c, CliOptions& o) {
  static const std::set<std::string> kKnown = {"SIGTERM", "SIGINT",  "SIGHUP",  "SIGQUIT",
                                               "SIGUSR1", "SIGUSR2", "SIGABRT", "SIGALRM",
                                               "SIGPIPE", "SIGCHLD", "SIGCONT", "SIGTSTP"};
  std::vector<std::string> names;
  for (std::string item : Split(c.value, ',')) {
    item.erase(std::remove_if(item.begin(), item.end(),
                              [](unsigned char ch) { return std::isspace(ch) != 0; }),
               item.end());
    if (item.empty()) continue;
    if (kKnown.count(item) == 0) {
      return BadValue(c.source, c.value, "'" + item + "' is not a signal name gculaunch knows",
                      "SIGTERM,SIGINT,SIGHUP,SIGQUIT");
    }
    names.push_back(item);
  }
  if (names.empty()) {
    return BadValue(c.source, c.value, "expected signal names", "SIGTERM,SIGINT,SIGHUP,SIGQUIT");
  }
  o.signals_to_handle = names;
  return OkStatus();
}

// --preload: Python module names (dotted identifiers), comma-separated.
Status ApplyPreload(const ApplyContext& c, CliOptions& o) {
  std::vector<std::string> modules;
  for (const std::string& item : Split(c.value, ',')) {
    const std::string name = Trim(item);
    if (name.empty()) continue;
    bool valid = true;
    for (const std::string& part : Split(name, '.')) {
      valid = valid && !part.empty() && std::isdigit(static_cast<unsigned char>(part[0])) == 0 &&
              std::all_of(part.begin(), part.end(),
                          [](unsigned char ch) { return std::isalnum(ch) != 0 || ch == '_'; });
    }
    if (!valid) {
      return BadValue(c.source, c.value, "'" + name + "' is not a Python module name",
                      "torch,torch.distributed");
    }
    modules.push_back(name);
  }
  if (modules.empty()) {
    return BadValue(c.source, c.value, "expected module names", "torch,torch.distributed");
  }
  o.preload = modules;
  return OkStatus();
}

std::vector<std::string> SplitCommaList(const std::string& text) {
  // Read left to right: ",," is one literal comma, a lone ',' ends an item (so ",,," is a
  // comma followed by the end of an item, as torch reads it).
  std::vector<std::string> items(1);
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != ',') {
      items.back() += text[i];
    } else if (i + 1 < text.size() && text[i + 1] == ',') {
      items.back() += ',';
      ++i;
    } else {
      items.emplace_back();
    }
  }
  return items;
}

// --numa-binding: torch's affinity modes; MakeLaunchSpec maps them onto --cpu-affinity.
Status ApplyNumaBinding(const ApplyContext& c, CliOptions& o) {
  if (c.value != "node" && c.value != "socket" && c.value != "exclusive" &&
      c.value != "core-complex") {
    return BadValue(c.source, c.value, "expected node, socket, exclusive or core-complex", "node");
  }
  o.numa_binding = c.value;
  return OkStatus();
}

// For a flag accepted for compatibility that changes nothing: the entry says so explicitly
// (IgnoredFlagNames lists them; cli_test.cc checks they leave CliOptions as it was).
Status Ignored(const ApplyContext& /*c*/, CliOptions& /*o*/) { return OkStatus(); }

}  // namespace gculaunch::cli_flags
