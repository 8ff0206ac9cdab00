#include "launcher/frontend/cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <set>
#include <sstream>

#include "base/duration.h"
#include "base/one_line.h"
#include "base/text.h"
#include "launcher/frontend/device_profile.h"
#include "launcher/frontend/etcd_settings.h"

// The CLI11 adapter.  CLI11 only splits the command line into raw strings
// (it is told every value is TEXT); the PET_* fallback and all value checks
// are ours, so a value from the command line and the same value from PET_X
// go through one function and produce the same message (naming the source).
// CLI11's own envname() is not used: it calls getenv, and only main() may
// read the process environment.
//
// Each flag is one row of kFlags, and the row names the function that applies it: the
// command line, PET_* and job files (ApplyFlagText) all go through that function.  A row
// cannot be written without one, so a new flag cannot be accepted and silently dropped; a
// flag accepted only for compatibility says so with `Ignored`.

namespace gculaunch {
namespace {

enum class Kind { kValue, kBool, kRepeat };

// One flag's value as its apply function sees it.
struct ApplyContext {
  const std::string& source;  ///< "--nnodes", "PET_NNODES" or "job.yaml:3: nnodes", for messages
  const std::string& value;   ///< kValue: the value (not empty); kRepeat: one item
  bool on = false;            ///< kBool: the switch's value
};

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

// "64M" -> 67108864: bytes, or K, M, G (powers of 1024), optionally followed by "B"/"iB".
template <std::optional<std::size_t> CliOptions::*field>
Status ApplySize(const ApplyContext& c, CliOptions& o) {
  std::size_t i = 0;
  std::uint64_t value = 0;
  for (; i < c.value.size() && c.value[i] >= '0' && c.value[i] <= '9'; ++i) {
    if (value > (UINT64_MAX - 9) / 10) return BadValue(c.source, c.value, "too large", "256M");
    value = value * 10 + static_cast<std::uint64_t>(c.value[i] - '0');
  }
  std::string unit = c.value.substr(i);
  for (char& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  int shift = -1;
  if (unit.empty() || unit == "B") shift = 0;
  if (unit == "K" || unit == "KB" || unit == "KIB") shift = 10;
  if (unit == "M" || unit == "MB" || unit == "MIB") shift = 20;
  if (unit == "G" || unit == "GB" || unit == "GIB") shift = 30;
  if (i == 0 || shift < 0 || value == 0 || value > (UINT64_MAX >> shift)) {
    return BadValue(c.source, c.value, "expected a positive size in bytes (K, M, G suffixes)",
                    "256M");
  }
  o.*field = static_cast<std::size_t>(value << shift);
  return OkStatus();
}

template <std::optional<int> CliOptions::*field>
Status ApplyPort(const ApplyContext& c, CliOptions& o) {
  auto port = ParsePort(c.source, c.value);
  if (!port.ok()) return port.error();
  o.*field = *port;
  return OkStatus();
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

template <std::optional<std::string> CliOptions::*field>
Status ApplyRunId(const ApplyContext& c, CliOptions& o) {
  if (!IsRunId(c.value)) {
    return BadValue(c.source, c.value, "expected letters, digits, '.', '_' or '-'", "job-42");
  }
  o.*field = c.value;
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
    if (!ParseBoolText(val)) {
      return BadRdzvItem(c, key, val, "'is_host' expects true or false", "is_host=true");
    }
  } else if (IsEtcdConfKey(key)) {
    if (auto bad = CheckEtcdConfValue(key, val)) {
      return BadRdzvItem(c, key, val, bad->problem, bad->example);
    }
  } else {
    // Only the key: a misspelt "pasword=..." must not show its value.
    return Error{c.source + ": unknown key '" + key + "'",
                 "accepted keys: timeout, join_timeout, last_call_timeout, close_timeout, "
                 "read_timeout, is_host; with --rdzv-backend etcd also protocol, cacert, cert, "
                 "key, etcd_prefix, user, password, password_file, lease_ttl (docs/etcd.md)"};
  }
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

// Seconds >= 0 (--grace-period, --monitor-interval, --progress-interval).
template <std::optional<double> CliOptions::*field>
Status ApplySeconds(const ApplyContext& c, CliOptions& o) {
  auto seconds = ParseSeconds(c.value);
  if (auto bad = CheckSeconds(c.source, c.value, seconds, false, "expected seconds (a number >= 0)",
                              "25")) {
    return *bad;
  }
  o.*field = *seconds;
  return OkStatus();
}

// A duration > 0 (--hang-timeout, --hang-grace).
template <std::optional<double> CliOptions::*field>
Status ApplyDuration(const ApplyContext& c, CliOptions& o) {
  auto seconds = ParseDuration(c.value);
  if (auto bad = CheckSeconds(c.source, c.value, seconds, true,
                              "expected a duration > 0 (seconds, or with ms, s, m, h)", "90s")) {
    return *bad;
  }
  o.*field = *seconds;
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

// A path or name taken as given; later steps check it (MakeLaunchSpec, the job file).
template <std::optional<std::string> CliOptions::*field>
Status ApplyText(const ApplyContext& c, CliOptions& o) {
  o.*field = c.value;
  return OkStatus();
}

// --redirects, --tee.
template <std::optional<StdStreams> CliOptions::*field>
Status ApplyStreams(const ApplyContext& c, CliOptions& o) {
  auto streams = ParseStdStreams(c.source, c.value);
  if (!streams.ok()) return streams.error();
  o.*field = *streams;
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

// --numa-binding: torch's affinity modes; MakeLaunchSpec maps them onto --cpu-affinity.
Status ApplyNumaBinding(const ApplyContext& c, CliOptions& o) {
  if (c.value != "node" && c.value != "socket" && c.value != "exclusive" &&
      c.value != "core-complex") {
    return BadValue(c.source, c.value, "expected node, socket, exclusive or core-complex", "node");
  }
  o.numa_binding = c.value;
  return OkStatus();
}

template <bool CliOptions::*field>
Status ApplySwitch(const ApplyContext& c, CliOptions& o) {
  o.*field = c.on;
  return OkStatus();
}

// For a flag accepted for compatibility that changes nothing: the entry says so explicitly
// (IgnoredFlagNames lists them; cli_test.cc checks they leave CliOptions as it was).
Status Ignored(const ApplyContext& /*c*/, CliOptions& /*o*/) { return OkStatus(); }

// ---- the flag table ----

/// Checks one flag's value and sets the flag's field of CliOptions.
using ApplyFn = Status (*)(const ApplyContext&, CliOptions&);

struct FlagDef {
  // Every field is required: an entry without an apply function does not compile.
  constexpr FlagDef(const char* name_in, const char* aliases_in, Kind kind_in, const char* value_in,
                    const char* group_in, const char* help_in, ApplyFn apply_in,
                    const char* torchrun_in)
      : name(name_in),
        aliases(aliases_in),
        kind(kind_in),
        value(value_in),
        group(group_in),
        help(help_in),
        apply(apply_in),
        torchrun(torchrun_in) {}

  const char* name;     ///< canonical long name, without "--"
  const char* aliases;  ///< further CLI11 names, comma-separated ("" for none)
  Kind kind;
  const char* value;  ///< value shape for help and messages
  const char* group;
  const char* help;
  ApplyFn apply;  ///< kBool: gets ApplyContext::on; the others the value text
  /// The torchrun flag this row implements, dashed ("nproc-per-node", "shutdown-timeout"),
  /// or kGculaunchOnly.  Only torchrun's flags may be abbreviated (ResolvePrefixes).
  const char* torchrun;
};

constexpr const char* kGculaunchOnly = "";

// Every flag, in help order.  The '_' spelling of each name is added
// automatically; `aliases` holds other names (short forms, torchrun's
// alternatives).  PET_<NAME> uses `name`.
constexpr FlagDef kFlags[] = {
    // topology
    {"nproc-per-node", "", Kind::kValue, "N|auto|gpu|cpu", "Topology",
     "ranks on this node: a number, auto (cards in the pool; CPUs for --device cpu), gpu (cards "
     "in the pool) or cpu (CPUs); default 1",
     &ApplyNprocPerNode, "nproc-per-node"},
    {"nnodes", "", Kind::kValue, "N", "Topology",
     "number of nodes: N, or MIN:MAX for an elastic job; default 1", &ApplyNnodes, "nnodes"},
    {"node-rank", "", Kind::kValue, "N", "Topology", "this node's rank, 0..nnodes-1; default 0",
     &ApplyNodeRank, "node-rank"},
    {"master-addr", "", Kind::kValue, "HOST", "Topology",
     "address of the rendezvous store (MASTER_ADDR); default 127.0.0.1", &ApplyMasterAddr,
     "master-addr"},
    {"master-port", "", Kind::kValue, "PORT", "Topology",
     "port of the rendezvous store (MASTER_PORT); default 29500, or chosen at launch with "
     "--standalone",
     &ApplyPort<&CliOptions::master_port>, "master-port"},
    {"rdzv-endpoint", "", Kind::kValue, "HOST:PORT", "Topology",
     "the store as HOST:PORT or [IPv6]:PORT (instead of --master-addr/--master-port; PORT "
     "defaults to 29400); with --rdzv-backend etcd: etcd's endpoints, HOST:2379[,HOST:2379...]",
     &ApplyRdzvEndpoint, "rdzv-endpoint"},
    {"rdzv-backend", "", Kind::kValue, "static|c10d|etcd", "Topology",
     "static and c10d (torchrun's names) both mean gculaunch's own store; etcd (or etcd-v2; "
     "gculaunch speaks etcd's v3 API) keeps the rendezvous in etcd",
     &ApplyRdzvBackend, "rdzv-backend"},
    {"rdzv-id", "", Kind::kValue, "ID", "Topology",
     "run id (TORCHELASTIC_RUN_ID); same as --run-id; with --rdzv-backend etcd it names the "
     "job's keys, <etcd_prefix>/ID/, and is required",
     &ApplyRunId<&CliOptions::rdzv_id>, "rdzv-id"},
    {"run-id", "", Kind::kValue, "ID", "Topology",
     "run id (TORCHELASTIC_RUN_ID); default: generated with --standalone, else \"none\"",
     &ApplyRunId<&CliOptions::run_id>, kGculaunchOnly},
    {"rdzv-conf", "", Kind::kValue, "K=V,...", "Topology",
     "rendezvous settings, kept for multi-node: timeout, join_timeout, last_call_timeout, "
     "close_timeout, read_timeout (seconds), is_host (true/false); etcd: protocol, cacert, "
     "cert, key, etcd_prefix, user, password, password_file, lease_ttl (docs/etcd.md)",
     &ApplyRdzvConf, "rdzv-conf"},
    {"rdzv-timeout", "", Kind::kValue, "SECONDS", "Topology",
     "multi-node: how long nodes wait for the master node and for each other; default 900",
     &ApplyRdzvTimeout, kGculaunchOnly},
    {"standalone", "", Kind::kBool, "", "Topology",
     "single node: store on 127.0.0.1, port chosen at launch (or --master-port)",
     &ApplySwitch<&CliOptions::standalone>, "standalone"},
    {"platform-world-size", "", Kind::kValue, "nodes|procs", "Topology",
     "how to read a job platform's WORLD_SIZE: nodes (default: Volcano, KubeBrain, older "
     "Kubeflow) or procs (nodes x nproc; needs --nproc-per-node N)",
     &ApplyPlatformWorldSize, kGculaunchOnly},
    {"max-restarts", "", Kind::kValue, "N", "Topology",
     "restart all ranks up to N times after a failure (at most 1000000); default 0",
     &ApplyMaxRestarts, "max-restarts"},
    {"restart-backoff", "", Kind::kValue, "INITIAL:MAX|off", "Topology",
     "a crash loop backs off: after attempts that each ran under 10 s, restarts wait INITIAL "
     "seconds, doubling up to MAX (the first restart never waits; an attempt of 60 s resets "
     "it); off (or 0): restart at once; default 1:60",
     &ApplyRestartBackoff, kGculaunchOnly},
    {"monitor-interval", "", Kind::kValue, "SECONDS", "Topology",
     "accepted for torchrun compatibility and ignored: gculaunch notices exits at once",
     &ApplySeconds<&CliOptions::monitor_interval>, "monitor-interval"},
    {"role", "", Kind::kValue, "NAME", "Topology", "ROLE_NAME of the ranks; default \"default\"",
     &ApplyRole, "role"},
    {"start-method", "", Kind::kValue, "spawn|fork|forkserver", "Topology",
     "accepted for torchrun compatibility and ignored: every rank is a new process (fork and "
     "exec)",
     &ApplyStartMethod, "start-method"},
    {"local-addr", "", Kind::kValue, "HOST", "Topology",
     "multi-node: the address this node publishes to the others; default the interface that "
     "routes to the master",
     &ApplyLocalAddr, "local-addr"},
    // program
    {"module", "-m", Kind::kBool, "", "Program",
     "SCRIPT is a Python module: run python -u -m SCRIPT ARGS", &ApplySwitch<&CliOptions::module>,
     "module"},
    {"no-python", "", Kind::kBool, "", "Program", "SCRIPT is a program: run SCRIPT ARGS directly",
     &ApplySwitch<&CliOptions::no_python>, "no-python"},
    {"run-path", "", Kind::kBool, "", "Program",
     "accepted for torchrun compatibility: SCRIPT runs as python -u SCRIPT in each rank, as "
     "without it (the interpreter is --python or PYTHON_EXEC)",
     &ApplySwitch<&CliOptions::run_path>, "run-path"},
    {"python", "", Kind::kValue, "PATH", "Program",
     "the interpreter; default $PYTHON_EXEC, else python3 on PATH", &ApplyText<&CliOptions::python>,
     kGculaunchOnly},
    {"use-env", "", Kind::kBool, "", "Program", "accepted: LOCAL_RANK is always in the environment",
     &ApplySwitch<&CliOptions::use_env>, kGculaunchOnly},
    {"local-rank-arg", "", Kind::kBool, "", "Program",
     "also pass --local_rank=N after SCRIPT (legacy torch.distributed.launch scripts)",
     &ApplySwitch<&CliOptions::local_rank_arg>, kGculaunchOnly},
    {"python-shim", "", Kind::kBool, "", "Program",
     "load gculaunch's sitecustomize in each rank: init_process_group with the device's "
     "backend before your code, torch.cuda.set_device & co. redirected to the vendor module "
     "on non-CUDA devices, gloo if the backend is missing (for MMEngine and other CUDA-minded "
     "code)",
     &ApplySwitch<&CliOptions::python_shim>, kGculaunchOnly},
    {"no-backend-fallback", "", Kind::kBool, "", "Program",
     "with --python-shim: a missing backend stops the rank instead of falling back to gloo",
     &ApplySwitch<&CliOptions::no_backend_fallback>, kGculaunchOnly},
    {"stack-dumps", "", Kind::kBool, "", "Program",
     "load gculaunch's stack-dump hook in each rank, so that `gculaunch stacks` can show every "
     "thread's Python stack of a running rank without stopping it (on with --hang-timeout)",
     &ApplySwitch<&CliOptions::stack_dumps>, kGculaunchOnly},
    {"no-python-faulthandler", "", Kind::kBool, "", "Program",
     "do not give ranks PYTHONFAULTHANDLER=1 (by default a rank that dies of SIGSEGV, SIGABRT, "
     "SIGBUS, SIGFPE or SIGILL prints its Python stack)",
     &ApplySwitch<&CliOptions::no_python_faulthandler>, kGculaunchOnly},
    {"job", "", Kind::kValue, "FILE.yaml", "Program",
     "a job file: script, args, flags, env and a training config per card count; flags and "
     "PET_* variables override it; SCRIPT may then be left out",
     &ApplyText<&CliOptions::job>, kGculaunchOnly},
    // devices
    {"device", "", Kind::kValue, "NAME|auto|PATH.yaml", "Devices",
     "device profile: gcu, cuda, cpu, ascend, mlu, rocm, auto (first whose cards exist, else "
     "cpu), or a profile YAML file; default auto",
     &ApplyText<&CliOptions::device>, kGculaunchOnly},
    {"bind", "", Kind::kValue, "all|rank", "Devices",
     "all: every rank sees the whole card pool (as torchrun); rank: each rank sees only its "
     "card; default all",
     &ApplyBind, kGculaunchOnly},
    {"cpu-affinity", "", Kind::kValue, "none|numa|spread", "Devices",
     "pin each rank to CPUs: numa: its card's NUMA node, split fairly among the ranks there; "
     "spread: all CPUs split fairly; also sets OMP_NUM_THREADS to the rank's share unless you "
     "set it; default none",
     &ApplyCpuAffinity, kGculaunchOnly},
    {"numa-binding", "", Kind::kValue, "node|socket|exclusive|core-complex", "Devices",
     "torchrun's NUMA binding, done as --cpu-affinity numa (each rank pinned to CPUs of its "
     "card's NUMA node)",
     &ApplyNumaBinding, "numa-binding"},
    {"virtual-local-rank", "", Kind::kBool, "", "Devices",
     "torchrun's virtual local rank, done as --bind rank: each rank sees only its own card, "
     "as device index 0",
     &ApplySwitch<&CliOptions::virtual_local_rank>, "virtual-local-rank"},
    {"env", "", Kind::kRepeat, "KEY=VALUE", "Devices",
     "set a variable for every rank (repeatable; overrides your environment and the profile)",
     &ApplyEnv, kGculaunchOnly},
    {"sysroot", "", Kind::kValue, "DIR", "Devices",
     "look for /dev and /sys below DIR (for tests and preflight checks)",
     &ApplyText<&CliOptions::sysroot>, kGculaunchOnly},
    // supervision and output
    {"grace-period", "shutdown-timeout", Kind::kValue, "SECONDS", "Supervision",
     "time between SIGTERM and SIGKILL when stopping ranks; default 25",
     &ApplySeconds<&CliOptions::grace_period>, "shutdown-timeout"},
    {"no-agent-store", "", Kind::kBool, "", "Supervision",
     "rank 0 hosts the store (TORCHELASTIC_USE_AGENT_STORE=False) instead of gculaunch",
     &ApplySwitch<&CliOptions::no_agent_store>, kGculaunchOnly},
    {"worker-port", "", Kind::kValue, "PORT", "Supervision",
     "with --no-agent-store: the port rank 0 binds (MASTER_PORT)",
     &ApplyPort<&CliOptions::worker_port>, kGculaunchOnly},
    {"log-dir", "", Kind::kValue, "DIR", "Supervision",
     "write per-rank logs and error files below DIR/<run id>_<random>",
     &ApplyText<&CliOptions::log_dir>, "log-dir"},
    {"allow-shared-log-dir", "", Kind::kBool, "", "Supervision",
     "accept a --log-dir that another user could change (writable by others without the "
     "sticky bit, or owned by another user), with a warning; gculaunch then writes only its "
     "own log files there",
     &ApplySwitch<&CliOptions::allow_shared_log_dir>, kGculaunchOnly},
    {"redirects", "-r", Kind::kValue, "0-3|I:V,...", "Supervision",
     "send streams to the log files only: 1 stdout, 2 stderr, 3 both (per local rank: 0:3,1:2)",
     &ApplyStreams<&CliOptions::redirects>, "redirects"},
    {"tee", "-t", Kind::kValue, "0-3|I:V,...", "Supervision",
     "copy streams to the log files too: 1 stdout, 2 stderr, 3 both (per local rank: 0:3,1:2)",
     &ApplyStreams<&CliOptions::tee>, "tee"},
    {"local-ranks-filter", "", Kind::kValue, "I,J,...", "Supervision",
     "show only these local ranks' output on the console", &ApplyLocalRanksFilter,
     "local-ranks-filter"},
    {"stdin", "", Kind::kValue, "null|rank0", "Supervision",
     "null: ranks read /dev/null; rank0: rank 0 gets gculaunch's stdin (for breakpoint())",
     &ApplyStdin, kGculaunchOnly},
    {"summary-json", "", Kind::kValue, "PATH", "Supervision",
     "write the outcome of the run (exit codes, root cause) as JSON",
     &ApplyText<&CliOptions::summary_json>, kGculaunchOnly},
    {"progress-interval", "", Kind::kValue, "SECONDS", "Supervision",
     "when the console is not a terminal, show a rank's carriage-return (progress bar) updates "
     "at most this often, plus its final state; 0: every update; default 30",
     &ApplySeconds<&CliOptions::progress_interval>, kGculaunchOnly},
    {"hang-timeout", "", Kind::kValue, "DURATION", "Supervision",
     "a hang is DURATION without progress (any rank's output, or a touch of its "
     "GCULAUNCH_HEARTBEAT_FILE): every rank's stacks are shown, then --on-hang; off by default; "
     "turns on --stack-dumps",
     &ApplyDuration<&CliOptions::hang_timeout>, kGculaunchOnly},
    {"hang-grace", "", Kind::kValue, "DURATION", "Supervision",
     "with --hang-timeout: how long an attempt may go without any progress at start-up "
     "(import torch, data loading); default 600s",
     &ApplyDuration<&CliOptions::hang_grace>, kGculaunchOnly},
    {"on-hang", "", Kind::kValue, "stop|restart|report", "Supervision",
     "with --hang-timeout: stop (exit 6; default), restart (counts against --max-restarts) or "
     "report and keep running",
     &ApplyOnHang, kGculaunchOnly},
    {"signals-to-handle", "", Kind::kValue, "SIG,...", "Supervision",
     "signals that stop the ranks: SIGINT, SIGTERM, SIGHUP, SIGQUIT always do; a listed "
     "SIGUSR1, SIGUSR2 or SIGALRM does too (unlisted USR1/USR2 are forwarded)",
     &ApplySignalsToHandle, "signals-to-handle"},
    {"event-log-handler", "", Kind::kValue, "NAME", "Supervision",
     "accepted for torchrun compatibility and ignored: gculaunch logs to stderr and "
     "--summary-json",
     &ApplyText<&CliOptions::event_log_handler>, "event-log-handler"},
    {"logs-specs", "", Kind::kValue, "default", "Supervision",
     "torchrun's logs-spec plugin: only default (--log-dir, --redirects, --tee) is supported",
     &ApplyLogsSpecs, "logs-specs"},
    // metrics (docs/operations.md)
    {"metrics-port", "", Kind::kValue, "PORT", "Supervision",
     "serve Prometheus metrics over HTTP at http://ADDR:PORT/metrics (0: a free port, "
     "logged); default off",
     &ApplyPort<&CliOptions::metrics_port>, kGculaunchOnly},
    {"metrics-addr", "", Kind::kValue, "ADDR", "Supervision",
     "the address --metrics-port listens on; default 127.0.0.1 (0.0.0.0 or :: for every "
     "interface)",
     &ApplyText<&CliOptions::metrics_addr>, kGculaunchOnly},
    // the store's memory bounds (docs/tcpstore-protocol.md section 6.1)
    {"store-max-queued", "", Kind::kValue, "SIZE", "Supervision",
     "most bytes waiting to be sent to one store connection; more closes it (which fails a "
     "rank); default 256M",
     &ApplySize<&CliOptions::store_max_queued>, kGculaunchOnly},
    {"store-max-buffered", "", Kind::kValue, "SIZE", "Supervision",
     "most bytes all store connections together hold in partial requests and unsent "
     "replies; past it the ones holding the most are closed; default 256M",
     &ApplySize<&CliOptions::store_max_buffered>, kGculaunchOnly},
    // who may steer the job (docs/security.md)
    {"job-secret-file", "", Kind::kValue, "FILE", "Supervision",
     "a file holding the job's secret (every node the same; e.g. a mounted Kubernetes Secret): "
     "node agents prove it to node 0, whose store then lets no other client change gculaunch's "
     "own keys; default $GCULAUNCH_JOB_SECRET_FILE, else none",
     &ApplyText<&CliOptions::job_secret_file>, kGculaunchOnly},
    {"store-allow", "", Kind::kValue, "CIDR,...", "Supervision",
     "the store accepts connections only from these networks (and loopback), e.g. "
     "10.0.0.0/8,fd00::/64; default anyone",
     &ApplyText<&CliOptions::store_allow>, kGculaunchOnly},
    // what to do
    {"dry-run", "", Kind::kBool, "", "Dry run",
     "print every rank's command line and the variables gculaunch sets; start nothing",
     &ApplySwitch<&CliOptions::dry_run>, kGculaunchOnly},
    {"format", "", Kind::kValue, "table|json|env", "Dry run",
     "--dry-run output: table (default), json, or env (shell export lines)", &ApplyFormat,
     kGculaunchOnly},
};

constexpr bool EveryFlagApplies() {
  for (const FlagDef& def : kFlags) {
    if (def.apply == nullptr) return false;
  }
  return true;
}
static_assert(EveryFlagApplies(), "every entry of kFlags needs an apply function");

// Applies one value-taking flag (from the command line, PET_* or a job file).
Status ApplyValue(const FlagDef& def, const std::string& source, const std::string& value,
                  CliOptions& o) {
  // An empty PET_ variable counts as unset, so this only catches --flag ''.
  if (value.empty()) {
    return Error{source + " '': expected " + std::string(def.value),
                 "give a value or drop " + source};
  }
  return def.apply(ApplyContext{source, value}, o);
}

// Applies one item of a repeatable flag.
Status ApplyItem(const FlagDef& def, const std::string& source, const std::string& item,
                 CliOptions& o) {
  return def.apply(ApplyContext{source, item}, o);
}

// Applies a boolean flag's value.
Status ApplySwitchValue(const FlagDef& def, const std::string& source, bool on, CliOptions& o) {
  const std::string none;
  return def.apply(ApplyContext{source, none, on}, o);
}

Error UnknownFlag(const std::string& arg) {
  const std::string flag = arg.substr(0, arg.find('='));
  std::string best;
  size_t best_distance = 3;  // suggest only close matches
  for (const FlagDef& def : kFlags) {
    for (const std::string& candidate : {std::string(def.name), Underscored(def.name)}) {
      const size_t d = EditDistance(flag, "--" + candidate);
      if (d < best_distance) {
        best_distance = d;
        best = "--" + std::string(def.name);
      }
    }
  }
  std::string hint = best.empty() ? "see gculaunch --help" : "did you mean " + best + "?";
  hint += " (gculaunch's flags go before SCRIPT)";
  return Error{"unknown flag '" + flag + "'", hint};
}

// Usage line with SCRIPT: CLI11's own usage line knows nothing of the
// prefix-command positional part.
// It also puts the usage line before the description.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_description(const CLI::App* /*app*/) const override { return ""; }
  std::string make_usage(const CLI::App* app, std::string /*name*/) const override {
    return "Usage: gculaunch [OPTIONS] SCRIPT [SCRIPT_ARGS...]\n\n" + app->get_description() + "\n";
  }
};

constexpr const char* kDescription =
    "gculaunch starts one training process (rank) per accelerator card on this node, gives each "
    "the environment torchrun would (LOCAL_RANK, RANK, WORLD_SIZE, MASTER_ADDR, ...) plus the "
    "card's, supervises them and tears everything down.";

constexpr const char* kFooter = R"(Examples:
  gculaunch --standalone --nproc-per-node 4 --device cpu examples/allreduce.py
  gculaunch --nproc-per-node 8 train.py cfg.py          8 ranks, GCU cards found in /dev
  gculaunch --nproc-per-node auto --bind rank train.py  one card per rank
  gculaunch --dry-run --device gcu --nproc-per-node 8 --format json train.py
  gculaunch --nnodes 2 --node-rank 1 --master-addr node0 --nproc-per-node 8 train.py
  gculaunch --no-python --nproc-per-node 2 ./run.sh --rank-arg '${local_rank}'

Every flag can also come from PET_<FLAG> (PET_NPROC_PER_NODE=8); the command line wins.
Everything from SCRIPT on goes to the script untouched; ${local_rank} is replaced per rank.
A card pool already set in the environment (TOPS_VISIBLE_DEVICES=4,5,6,7) is honoured.
Exit codes: 0 success; the first failing rank's code (128+signal if killed); 2 usage error;
3 rendezvous failed; 4 node lost; 5 ranks could not be killed; 70 internal error.)";

void AddFlags(CLI::App& app, std::map<std::string, std::string>& values,
              std::map<std::string, std::vector<std::string>>& lists,
              std::map<std::string, bool>& flags, std::map<std::string, CLI::Option*>& options) {
  for (const FlagDef& def : kFlags) {
    std::string names = "--" + std::string(def.name);
    if (Underscored(def.name) != def.name) names += ",--" + Underscored(def.name);
    for (const std::string& alias : Split(def.aliases, ',')) {
      if (alias.empty()) continue;
      if (alias[0] == '-') {
        names += "," + alias;
      } else {
        names += ",--" + alias;
        if (Underscored(alias) != alias) names += ",--" + Underscored(alias);
      }
    }
    std::string help = def.help;
    help += " [" + PetName(def.name) + "]";
    CLI::Option* option = nullptr;
    switch (def.kind) {
      case Kind::kBool:
        option = app.add_flag(names, flags[def.name], help);
        break;
      case Kind::kValue:
        option = app.add_option(names, values[def.name], help)
                     ->type_name(def.value)
                     ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
        break;
      case Kind::kRepeat:
        option = app.add_option(names, lists[def.name], help)
                     ->type_name(def.value)
                     ->expected(1)
                     ->allow_extra_args(false)
                     ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
        break;
    }
    option->group(def.group);
    options[def.name] = option;
  }
}

const FlagDef* FlagNamed(const std::string& flag) {
  for (const FlagDef& def : kFlags) {
    if (flag == "--" + std::string(def.name) || flag == "--" + Underscored(def.name)) return &def;
  }
  return nullptr;
}

// Every name a row answers to exactly: "--name", "--na_me", its aliases ("-m", "--x").
std::vector<std::string> ExactNames(const FlagDef& def) {
  std::vector<std::string> names = {"--" + std::string(def.name), "--" + Underscored(def.name)};
  for (const std::string& alias : Split(def.aliases, ',')) {
    if (alias.empty()) continue;
    if (alias[0] == '-') {
      names.push_back(alias);
    } else {
      names.push_back("--" + alias);
      names.push_back("--" + Underscored(alias));
    }
  }
  return names;
}

const FlagDef* ExactFlag(const std::string& flag) {
  for (const FlagDef& def : kFlags) {
    const std::vector<std::string> names = ExactNames(def);
    if (std::find(names.begin(), names.end(), flag) != names.end()) return &def;
  }
  return nullptr;
}

// argparse's abbreviations, as torchrun users write them (--nnode=1, --nproc_per_nod 8):
// `flag` ("--nproc_per_nod") is a prefix of torchrun flags in either spelling.  Only
// torchrun's flags take part, so a new gculaunch flag never makes an old command line
// ambiguous.  Returns the rows it matches (once each).
std::vector<const FlagDef*> PrefixMatches(const std::string& flag) {
  std::vector<const FlagDef*> matches;
  if (flag.size() < 3) return matches;  // "--" alone is the end of the flags
  for (const FlagDef& def : kFlags) {
    const std::string torchrun = def.torchrun;
    if (torchrun.empty()) continue;
    for (const std::string& name : {"--" + torchrun, "--" + Underscored(torchrun)}) {
      if (name.rfind(flag, 0) == 0) {
        matches.push_back(&def);
        break;
      }
    }
  }
  return matches;
}

// Rewrites abbreviated torchrun flags before SCRIPT to their canonical name; an ambiguous
// abbreviation is an error naming the candidates.  Stops at SCRIPT, "--" or a flag it does
// not know (the parser reports that one).
Result<std::vector<std::string>> ResolvePrefixes(std::vector<std::string> args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--" || arg.size() < 2 || arg[0] != '-') break;
    const size_t eq = arg.find('=');
    const std::string flag = arg.substr(0, eq);
    const bool has_value = eq != std::string::npos;
    if (flag == "--help" || flag == "-h" || flag == "--version") continue;
    const bool is_long = flag.rfind("--", 0) == 0;
    // A short form may carry its value attached ("-r3").
    const bool short_attached = !is_long && flag.size() > 2;
    const FlagDef* def = ExactFlag(short_attached ? flag.substr(0, 2) : flag);
    if (def == nullptr && is_long) {
      const std::vector<const FlagDef*> matches = PrefixMatches(flag);
      if (matches.size() > 1) {
        std::string candidates;
        for (const FlagDef* match : matches) {
          candidates += (candidates.empty() ? "--" : ", --") + std::string(match->torchrun);
        }
        return Error{"ambiguous flag '" + flag + "': it could be " + candidates,
                     "write the whole flag name"};
      }
      if (matches.size() == 1) {
        def = matches.front();
        args[i] = "--" + std::string(def->name) + (has_value ? arg.substr(eq) : "");
      }
    }
    if (def == nullptr) break;
    if (def->kind != Kind::kBool && !has_value && !short_attached) ++i;  // skip the value
  }
  return args;
}

// Converts a CLI11 parse error into our one-line Error.  CLI11 names the flag
// by its first long name; the two messages users meet are reworded.
Error FromCli11(const CLI::ParseError& e) {
  const std::string message = e.what();
  if (e.get_name() == "ArgumentMismatch") {
    // "--nnodes: 1 required TEXT missing"
    const std::string flag = message.substr(0, message.find(':'));
    if (const FlagDef* def = FlagNamed(flag)) {
      return Error{flag + " needs a value",
                   "write it as " + flag + " " + def->value + "; see gculaunch --help"};
    }
  }
  if (e.get_name() == "ConversionError") {
    // "Could not convert: --dry-run = maybe": a value given to a boolean flag.
    const std::string prefix = "Could not convert: ";
    const size_t eq = message.find(" = ");
    if (message.rfind(prefix, 0) == 0 && eq != std::string::npos) {
      const std::string flag = message.substr(prefix.size(), eq - prefix.size());
      return Error{flag + " '" + message.substr(eq + 3) + "': this flag takes no value",
                   "write just " + flag + " (or " + flag + "=true / " + flag + "=false)"};
    }
  }
  return Error{message, "see gculaunch --help"};
}

}  // namespace

int StdStreams::For(int local_rank) const {
  if (per_rank.empty()) return all;
  auto it = per_rank.find(local_rank);
  return it == per_rank.end() ? 0 : it->second;
}

std::string CliOptions::Source(std::string_view name) const {
  auto it = given.find(std::string(name));
  return it == given.end() ? "--" + std::string(name) : it->second;
}

bool CliOptions::FromCommandLineForTest(std::string_view name) const {
  auto it = given.find(std::string(name));
  return it != given.end() && it->second.rfind("--", 0) == 0;
}

namespace {

// Applies a flag given on the command line, from what CLI11 collected for it: `value`
// (kValue), `items` (kRepeat) or `on` (kBool).
Status ApplyCommandLine(const FlagDef& def, const std::string& source, const std::string& value,
                        const std::vector<std::string>& items, bool on, CliOptions& o) {
  switch (def.kind) {
    case Kind::kBool:
      return ApplySwitchValue(def, source, on, o);
    case Kind::kValue:
      return ApplyValue(def, source, value, o);
    case Kind::kRepeat:
      for (const std::string& item : items) {
        if (Status applied = ApplyItem(def, source, item, o); !applied.ok()) return applied;
      }
      return OkStatus();
  }
  return OkStatus();
}

// Applies a flag from its PET_<NAME> variable `pet` (not empty): an integer or true/false for
// a boolean flag, one item per line for a repeatable one (empty lines skipped).
Status ApplyPet(const FlagDef& def, const std::string& pet, const std::string& text,
                CliOptions& o) {
  switch (def.kind) {
    case Kind::kBool: {
      auto on = ParseBoolText(text);
      if (!on) {
        return Error{pet + " '" + text + "': expected 1 or 0 (or true/false)",
                     "e.g. " + pet + "=1"};
      }
      return ApplySwitchValue(def, pet, *on, o);
    }
    case Kind::kValue:
      return ApplyValue(def, pet, text, o);
    case Kind::kRepeat:
      for (const std::string& item : Split(text, '\n')) {
        if (item.empty()) continue;
        if (Status applied = ApplyItem(def, pet, item, o); !applied.ok()) return applied;
      }
      return OkStatus();
  }
  return OkStatus();
}

Result<CliResult> Parse(const std::vector<std::string>& args, const EnvMap& env,
                        const CliParseMode& mode) {
  CLI::App app(kDescription, "gculaunch");
  bool version = false;
  std::map<std::string, std::string> values;
  std::map<std::string, std::vector<std::string>> lists;
  std::map<std::string, bool> flags;
  std::map<std::string, CLI::Option*> options;

  CliResult result;
  auto resolved = ResolvePrefixes(args);
  if (!resolved.ok()) return resolved.error();
  std::vector<std::string> reversed(resolved->rbegin(), resolved->rend());
  try {
    app.formatter(std::make_shared<HelpFormatter>());
    app.get_formatter()->column_width(44);
    app.prefix_command();
    app.footer(kFooter);
    app.add_flag("--version", version, "print gculaunch's version and exit");
    AddFlags(app, values, lists, flags, options);
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    result.action = CliAction::kHelp;
    result.text = app.help();
    return result;
  } catch (const CLI::ParseError& e) {
    return FromCli11(e);
  } catch (const CLI::Error& e) {
    return Error{std::string("internal error in the command-line parser: ") + e.what(),
                 "please report this as a gculaunch bug"};
  }
  if (version) {
    result.action = CliAction::kVersion;
    result.text = "gculaunch " GCULAUNCH_VERSION "\n";
    return result;
  }

  CliOptions& o = result.options;
  std::vector<std::string> rest = app.remaining();
  if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());
  // With a job file the script may come from the file (MakeLaunchSpec merges it).
  const bool has_job = options["job"]->count() > 0 || !env.GetOr(PetName("job"), "").empty();
  if (rest.empty() && !mode.script_optional && !has_job) {
    return Error{"no SCRIPT given",
                 "gculaunch [OPTIONS] SCRIPT [SCRIPT_ARGS...]; see gculaunch --help"};
  }
  if (!rest.empty()) {
    if (rest.front().size() > 1 && rest.front()[0] == '-') return UnknownFlag(rest.front());
    o.script = rest.front();
    o.script_args.assign(rest.begin() + 1, rest.end());
  }

  for (const FlagDef& def : kFlags) {
    const bool on_command_line = options[def.name]->count() > 0;
    const std::string pet = PetName(def.name);
    const std::string pet_value = env.GetOr(pet, "");
    if (!on_command_line && pet_value.empty()) continue;
    const std::string source = on_command_line ? "--" + std::string(def.name) : pet;
    o.given[def.name] = source;
    const Status applied = on_command_line ? ApplyCommandLine(def, source, values[def.name],
                                                              lists[def.name], flags[def.name], o)
                                           : ApplyPet(def, pet, pet_value, o);
    if (!applied.ok()) return applied.error();
  }
  return result;
}

}  // namespace

bool IsRdzvConfKey(const std::string& key) { return IsRdzvKey(key); }

std::optional<std::string> CanonicalFlagName(std::string_view name) {
  for (const FlagDef& def : kFlags) {
    if (name == def.name || name == Underscored(def.name)) return std::string(def.name);
  }
  return std::nullopt;
}

std::vector<std::string> CanonicalFlagNames() {
  std::vector<std::string> names;
  for (const FlagDef& def : kFlags) names.emplace_back(def.name);
  return names;
}

std::vector<std::string> IgnoredFlagNames() {
  std::vector<std::string> names;
  for (const FlagDef& def : kFlags) {
    if (def.apply == &Ignored) names.emplace_back(def.name);
  }
  return names;
}

Status ApplyFlagText(std::string_view flag, const std::string& source, const std::string& value,
                     CliOptions& options) {
  const FlagDef* def = nullptr;
  for (const FlagDef& candidate : kFlags) {
    if (flag == candidate.name) def = &candidate;
  }
  if (def == nullptr) {
    return Error{"internal error: '" + std::string(flag) + "' is not a flag",
                 "please report this as a gculaunch bug"};
  }
  options.given[def->name] = source;
  Status applied = OkStatus();
  switch (def->kind) {
    case Kind::kBool: {
      auto on = ParseBoolText(value);
      if (!on) {
        return Error{source + " '" + value + "': expected true or false",
                     "e.g. " + Example(source, "true")};
      }
      applied = ApplySwitchValue(*def, source, *on, options);
      break;
    }
    case Kind::kValue:
      applied = ApplyValue(*def, source, value, options);
      break;
    case Kind::kRepeat:
      applied = ApplyItem(*def, source, value, options);
      break;
  }
  if (!applied.ok()) return OneLine(applied.error());
  return OkStatus();
}

Result<CliResult> ParseCli(const std::vector<std::string>& args, const EnvMap& env,
                           const CliParseMode& mode) {
  auto result = Parse(args, env, mode);
  if (!result.ok()) return OneLine(result.error());
  return result;
}

std::string DescribeFlag(const CliOptions& options, std::string_view name,
                         const std::string& value) {
  const std::string source = options.Source(name);
  return source.rfind("PET_", 0) == 0 ? source + "=" + value : source + " " + value;
}

}  // namespace gculaunch
