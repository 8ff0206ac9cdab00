// Internal to the command line (cli.cc, cli_apply.cc): what one flag's value goes through.
// Each row of cli.cc's flag table names an apply function declared here (or one of the
// templates below, one per shape of flag); it checks the value and sets the flag's own
// field of CliOptions.  The value parsers are shared by the apply functions and cli.cc.
// Not for other modules: they use cli.h.
#pragma once

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "launcher/frontend/cli.h"

namespace gculaunch::cli_flags {

// One flag's value as its apply function sees it.
struct ApplyContext {
  const std::string& source;  ///< "--nnodes", "PET_NNODES" or "job.yaml:3: nnodes", for messages
  const std::string& value;   ///< kValue: the value (not empty); kRepeat: one item
  bool on = false;            ///< kBool: the switch's value
};

// ---- value parsers (cli_apply.cc) ----
std::string PetName(std::string_view name);
std::string Underscored(std::string_view name);
std::string Example(const std::string& source, const std::string& value);
Error BadValue(const std::string& source, const std::string& value, const std::string& problem,
               const std::string& example);
std::optional<double> ParseSeconds(const std::string& text);
std::optional<double> ParseDuration(const std::string& text);
std::optional<Error> CheckSeconds(const std::string& source, const std::string& value,
                                  std::optional<double> seconds, bool positive,
                                  const std::string& problem, const std::string& example);
bool IsRunId(const std::string& id);
std::optional<bool> ParseBoolText(const std::string& text);
/// A --rdzv-conf boolean in torchrun's spellings (RendezvousParameters.get_as_bool): 1, true,
/// t, yes, y or 0, false, f, no, n, in any case; else nullopt.
std::optional<bool> ParseRdzvBool(const std::string& text);
Result<int> ParsePort(const std::string& source, const std::string& value);
Result<StdStreams> ParseStdStreams(const std::string& source, const std::string& value);
bool IsRdzvKey(const std::string& key);
/// The one warning about --rdzv-conf keys that are not gculaunch's (accepted and ignored, as
/// torchrun's backends ignore them): it names the keys, never their values; "" when none.
std::string UnknownRdzvConfKeys(const CliOptions& o);
/// torch's comma_separated_list: the items of `text` split at ',', where ",," is a literal
/// comma ("a,,b,c" -> {"a,b", "c"}; "a," -> {"a", ""}).
std::vector<std::string> SplitCommaList(const std::string& text);

// ---- one apply function per flag (cli_apply.cc) ----
Status ApplyNprocPerNode(const ApplyContext& c, CliOptions& o);
Status ApplyNnodes(const ApplyContext& c, CliOptions& o);
Status ApplyNodeRank(const ApplyContext& c, CliOptions& o);
Status ApplyMaxRestarts(const ApplyContext& c, CliOptions& o);
Status ApplyRestartBackoff(const ApplyContext& c, CliOptions& o);
Status ApplyMaxSameFailures(const ApplyContext& c, CliOptions& o);
Status ApplyMasterAddr(const ApplyContext& c, CliOptions& o);
Status ApplyRdzvEndpoint(const ApplyContext& c, CliOptions& o);
Status ApplyRdzvBackend(const ApplyContext& c, CliOptions& o);
Status ApplyRdzvConf(const ApplyContext& c, CliOptions& o);
Status ApplyRdzvTimeout(const ApplyContext& c, CliOptions& o);
Status ApplyNodeTimeout(const ApplyContext& c, CliOptions& o);
Status ApplyOnHang(const ApplyContext& c, CliOptions& o);
Status ApplyExitCodes(const ApplyContext& c, CliOptions& o);
Status ApplyPlatformWorldSize(const ApplyContext& c, CliOptions& o);
Status ApplyRole(const ApplyContext& c, CliOptions& o);
Status ApplyLocalRanksFilter(const ApplyContext& c, CliOptions& o);
Status ApplyBind(const ApplyContext& c, CliOptions& o);
Status ApplyCpuAffinity(const ApplyContext& c, CliOptions& o);
Status ApplyStdin(const ApplyContext& c, CliOptions& o);
Status ApplyFormat(const ApplyContext& c, CliOptions& o);
Status ApplyEnv(const ApplyContext& c, CliOptions& o);
Status ApplyStartMethod(const ApplyContext& c, CliOptions& o);
Status ApplyLocalAddr(const ApplyContext& c, CliOptions& o);
Status ApplyLogsSpecs(const ApplyContext& c, CliOptions& o);
Status ApplySignalsToHandle(const ApplyContext& c, CliOptions& o);
Status ApplyPreload(const ApplyContext& c, CliOptions& o);
Status ApplyNumaBinding(const ApplyContext& c, CliOptions& o);
Status Ignored(const ApplyContext&, CliOptions&);

// ---- one per shape of flag, for a field of CliOptions ----

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

template <std::optional<std::string> CliOptions::*field>
Status ApplyRunId(const ApplyContext& c, CliOptions& o) {
  if (!IsRunId(c.value)) {
    return BadValue(c.source, c.value, "expected letters, digits, '.', '_' or '-'", "job-42");
  }
  o.*field = c.value;
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

// --duplicate-stdout-filters, --duplicate-stderr-filters: any text is a filter list.
template <std::optional<std::vector<std::string>> CliOptions::*field>
Status ApplyFilters(const ApplyContext& c, CliOptions& o) {
  o.*field = SplitCommaList(c.value);
  return OkStatus();
}

template <bool CliOptions::*field>
Status ApplySwitch(const ApplyContext& c, CliOptions& o) {
  o.*field = c.on;
  return OkStatus();
}

}  // namespace gculaunch::cli_flags
