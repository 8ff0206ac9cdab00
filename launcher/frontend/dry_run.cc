#include "launcher/frontend/dry_run.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/text.h"
#include "launcher/frontend/cpu_list.h"
#include "launcher/frontend/ranks_python.h"
#include "launcher/frontend/ranks_torch.h"

namespace gculaunch {
namespace {

struct RankView {
  int local_rank = 0;
  int rank = 0;
  std::vector<std::string> argv;
  std::string console_prefix;              ///< ConsolePrefix
  std::map<std::string, std::string> env;  ///< set or overridden by gculaunch, and the contract
  std::vector<std::string> unchanged;      ///< contract variables the environment already held
};

std::vector<RankView> Ranks(const LaunchSpec& spec, const EnvMap& base) {
  const RankRuntime runtime = DryRunRuntime(spec);
  std::vector<RankView> ranks;
  for (int local_rank = 0; local_rank < spec.nproc_per_node; ++local_rank) {
    RankView view;
    view.local_rank = local_rank;
    view.rank = spec.rank_offset + local_rank;
    view.argv = BuildRankArgv(spec, local_rank);
    view.console_prefix = ConsolePrefix(spec, local_rank);
    const EnvMap env = BuildRankEnv(spec, base, local_rank, /*restart_count=*/0, runtime);
    view.env = base.ChangedIn(env);
    // Every variable of the rank contract is shown, also when the environment already held
    // that value: the printed environment is the rank's, and --format env reproduces it.
    for (const std::string& var : RankContractVariables(spec)) {
      auto value = env.Get(var);
      if (!value || view.env.count(var) != 0) continue;
      view.env[var] = *value;
      view.unchanged.push_back(var);
    }
    ranks.push_back(std::move(view));
  }
  return ranks;
}

// The note naming the contract variables that came from gculaunch's environment unchanged
// ("MASTER_ADDR, RANK (rank 1)"); empty when there are none.
std::string UnchangedNote(const std::vector<RankView>& ranks) {
  std::map<std::string, std::vector<int>> ranks_of;
  for (const RankView& view : ranks) {
    for (const std::string& var : view.unchanged) ranks_of[var].push_back(view.rank);
  }
  if (ranks_of.empty()) return "";
  std::vector<std::string> items;
  for (const auto& [var, which] : ranks_of) {
    if (which.size() == ranks.size()) {
      items.push_back(var);
      continue;
    }
    std::vector<std::string> numbers;
    for (int rank : which) numbers.push_back(std::to_string(rank));
    items.push_back(var + " (rank" + (which.size() > 1 ? "s " : " ") + Join(numbers, ",") + ")");
  }
  return "from gculaunch's environment unchanged (listed all the same): " + Join(items, ", ");
}

// Quotes only when the shell would otherwise split or expand the word.
std::string ShellWord(const std::string& text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
           std::string_view("_-./:,=+@%").find(c) != std::string_view::npos;
  });
  return plain ? text : ShellQuote(text);
}

std::string CommandLine(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& arg : argv) {
    if (!out.empty()) out += ' ';
    out += ShellWord(arg);
  }
  return out;
}

// A comment line for the env format: a newline inside a value would end the
// comment and turn the rest into a shell command.
std::string Comment(const std::string& text) {
  std::string out = "# ";
  for (char c : text) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out + "\n";
}

// The layout line and the warnings, then the other notes: what the JSON's
// "notes" holds.
std::vector<std::string> AllNotes(const LaunchSpec& spec) {
  std::vector<std::string> notes;
  if (!spec.layout.empty()) notes.push_back(spec.layout);
  for (const std::string& warning : spec.warnings) notes.push_back("warning: " + warning);
  notes.insert(notes.end(), spec.notes.begin(), spec.notes.end());
  return notes;
}

std::string MasterPortText(const LaunchSpec& spec) {
  return spec.master_port != 0 ? std::to_string(spec.master_port) : kPortPlaceholder;
}

// Where this node's ranks' store traffic goes: "" when straight to the store.
std::string StoreTraffic(const LaunchSpec& spec) {
  if (!ProxiesStore(spec)) return "";
  return "through this node's store proxy (" + std::string(kProxyAddress) + ":" +
         kProxyPortPlaceholder + ") to node 0's store at " + spec.master_addr + ":" +
         MasterPortText(spec) + ", over one connection";
}

// --metrics-port: where /metrics is served (port 0: the one chosen at launch).
std::string MetricsUrl(const LaunchSpec& spec) {
  const std::string& a = spec.metrics_addr;
  const std::string host = a.find(':') != std::string::npos ? "[" + a + "]" : a;
  const std::string port =
      spec.metrics_port.value_or(0) != 0 ? std::to_string(*spec.metrics_port) : kPortPlaceholder;
  return "http://" + host + ":" + port + "/metrics";
}

// A filter as Python prints a string in a list ('loss', "it's"), as torchrun users see
// args.duplicate_stdout_filters.
std::string PythonRepr(const std::string& text) {
  const char quote =
      text.find('\'') != std::string::npos && text.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (char c : text) {
    if (c == '\\' || c == quote) out += '\\';
    out += c;
  }
  return out + quote;
}

// --duplicate-*-filters: the file of each attempt ("<root>/attempt_<n>/filtered_stdout.log").
std::string FilteredFile(const LaunchSpec& spec, FilteredStream stream) {
  return DryRunRuntime(spec).log_root + "/attempt_<n>/" + FilteredLogName(stream);
}

// One line per filtered stream: the filters as torchrun parses them (',,' read), the file
// and the local ranks whose teed lines are matched; empty without filters.
std::string FilteredText(const LaunchSpec& spec, FilteredStream stream) {
  const std::vector<std::string>& filters = DuplicateFilters(spec, stream);
  if (filters.empty()) return "";
  std::vector<std::string> items;
  for (const std::string& filter : filters) items.push_back(PythonRepr(filter));
  const std::vector<int> ranks = FilteredLocalRanks(spec, stream);
  std::string from = "no local rank";
  if (!ranks.empty()) {
    from = (ranks.size() == 1 ? "local rank " : "local ranks ") + JoinInts(ranks, ",");
  }
  return std::string(stream == FilteredStream::kStdout ? "stdout" : "stderr") +
         " lines containing one of [" + Join(items, ", ") + "] -> " + FilteredFile(spec, stream) +
         " (from " + from + ")";
}

// --job-secret-file: only that there is one, never its content.
std::string SecretText(const LaunchSpec& spec) { return "set (file " + spec.job_secret_file + ")"; }

// --store-allow, with the loopback networks that are always allowed.
std::vector<std::string> AllowList(const LaunchSpec& spec) {
  std::vector<std::string> out;
  for (const Network& n : spec.store_allow) out.push_back(n.ToString());
  out.push_back("loopback");
  return out;
}

// --rdzv-backend etcd's settings, without the password.
nlohmann::ordered_json EtcdJson(const EtcdSettings& etcd) {
  nlohmann::ordered_json out;
  out["backend"] = etcd.backend;
  out["endpoints"] = etcd.endpoints;
  out["key_prefix"] = etcd.key_prefix;
  out["lease_ttl"] = etcd.lease_ttl_s;
  out["request_timeout"] = etcd.request_timeout_s;
  out["user"] = etcd.user;
  out["tls"] = etcd.tls;
  out["cacert"] = etcd.ca_cert;
  out["cert"] = etcd.cert;
  out["key"] = etcd.key;
  return out;
}

// The ranks' torch and the NCCL error-handling variable it gets (ranks_torch.h).
nlohmann::ordered_json TorchJson(const RanksTorch& torch) {
  nlohmann::ordered_json out;
  switch (torch.state) {
    case RanksTorch::State::kFound:
      out["version"] = torch.version;
      break;
    case RanksTorch::State::kAbsent:
      out["version"] = "none";
      break;
    case RanksTorch::State::kUnknown:
    case RanksTorch::State::kNotProbed:
      out["version"] = nullptr;
      break;
  }
  out["how"] = torch.how;
  out["nccl_error_handling"] = NcclErrorHandlingVariables(torch);
  out["text"] = DescribeRanksTorch(torch);
  return out;
}

std::string RenderJson(const LaunchSpec& spec, const EnvMap& base) {
  nlohmann::ordered_json out;
  out["nnodes"] = spec.nnodes;
  out["node_rank"] = spec.node_rank;
  out["nproc_per_node"] = spec.nproc_per_node;
  out["world_size"] = spec.world_size;
  out["master_addr"] = spec.master_addr;
  if (spec.master_port != 0) {
    out["master_port"] = spec.master_port;
  } else {
    out["master_port"] = kPortPlaceholder;
  }
  if (spec.metrics_port) out["metrics"] = MetricsUrl(spec);
  if (const auto* etcd = std::get_if<EtcdSettings>(&spec.rdzv)) out["etcd"] = EtcdJson(*etcd);
  if (!spec.job_secret.empty()) out["job_secret"] = SecretText(spec);
  if (!spec.store_allow.empty()) out["store_allow"] = AllowList(spec);
  if (const std::string via = StoreTraffic(spec); !via.empty()) out["store_traffic"] = via;
  if (const std::string logs = DryRunRuntime(spec).log_root; !logs.empty()) out["log_dir"] = logs;
  for (FilteredStream stream : {FilteredStream::kStdout, FilteredStream::kStderr}) {
    const std::vector<std::string>& filters = DuplicateFilters(spec, stream);
    if (filters.empty()) continue;
    const bool stdout_stream = stream == FilteredStream::kStdout;
    out[stdout_stream ? "duplicate_stdout_filters" : "duplicate_stderr_filters"] = filters;
    out[stdout_stream ? "filtered_stdout" : "filtered_stderr"] = {
        {"file", FilteredFile(spec, stream)}, {"local_ranks", FilteredLocalRanks(spec, stream)}};
  }
  if (!spec.interpreter_shim.empty()) {
    out["python"] = {{"shim", spec.interpreter_shim},
                     {"interpreter", spec.python},
                     {"how", spec.interpreter_shim_how}};
  }
  out["torch"] = TorchJson(spec.ranks_torch);
  const std::vector<RankView> ranks = Ranks(spec, base);
  std::vector<std::string> notes = AllNotes(spec);
  if (std::string note = UnchangedNote(ranks); !note.empty()) notes.push_back(std::move(note));
  out["notes"] = notes;
  out["ranks"] = nlohmann::ordered_json::array();
  for (const RankView& view : ranks) {
    nlohmann::ordered_json rank;
    rank["local_rank"] = view.local_rank;
    rank["rank"] = view.rank;
    rank["argv"] = view.argv;
    rank["console_prefix"] = view.console_prefix;
    rank["env"] = nlohmann::ordered_json::object();
    for (const auto& [key, value] : view.env) rank["env"][key] = value;
    out["ranks"].push_back(std::move(rank));
  }
  // replace: a variable holding invalid UTF-8 must not make dump() throw.
  return out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string RenderEnv(const LaunchSpec& spec, const EnvMap& base) {
  std::string out =
      Comment("gculaunch dry run: " + std::to_string(spec.nproc_per_node) + " ranks on node " +
              std::to_string(spec.node_rank) + ", world size " + std::to_string(spec.world_size));
  if (!spec.layout.empty()) out += Comment(spec.layout);
  if (const auto* etcd = std::get_if<EtcdSettings>(&spec.rdzv)) {
    out += Comment("etcd: " + etcd->Describe());
  }
  if (!spec.job_secret.empty()) out += Comment("job secret: " + SecretText(spec));
  if (!spec.store_allow.empty()) out += Comment("store allows: " + Join(AllowList(spec), ", "));
  if (const std::string via = StoreTraffic(spec); !via.empty()) {
    out += Comment("store traffic: " + via);
  }
  for (const std::string& warning : spec.warnings) out += Comment("warning: " + warning);
  for (FilteredStream stream : {FilteredStream::kStdout, FilteredStream::kStderr}) {
    if (std::string text = FilteredText(spec, stream); !text.empty()) {
      out += Comment("filters: " + text);
    }
  }
  for (const std::string& note : spec.notes) out += Comment("note: " + note);
  const std::vector<RankView> ranks = Ranks(spec, base);
  if (std::string note = UnchangedNote(ranks); !note.empty()) out += Comment("note: " + note);
  out += Comment("torch: " + DescribeRanksTorch(spec.ranks_torch));
  for (const RankView& view : ranks) {
    out += Comment("rank " + std::to_string(view.rank) + " (local rank " +
                   std::to_string(view.local_rank) + "): " + CommandLine(view.argv));
    for (const auto& [key, value] : view.env)
      out += "export " + key + "=" + ShellQuote(value) + "\n";
  }
  return out;
}

std::string RenderTable(const LaunchSpec& spec, const EnvMap& base) {
  std::string out = "gculaunch dry run: " + std::to_string(spec.nproc_per_node) +
                    " ranks on node " + std::to_string(spec.node_rank) + " of " +
                    std::to_string(spec.nnodes) + " (ranks " + std::to_string(spec.rank_offset) +
                    "-" + std::to_string(spec.rank_offset + spec.nproc_per_node - 1) +
                    " of world size " + std::to_string(spec.world_size) + ")\n";
  if (!spec.layout.empty()) out += spec.layout + "\n";
  for (const std::string& warning : spec.warnings) out += "warning: " + warning + "\n";
  out += "  store:   " + spec.master_addr + ":" + MasterPortText(spec) + ", hosted by " +
         (spec.store_mode == StoreMode::kAgent ? "gculaunch" : "rank 0") + "\n";
  if (const auto* etcd = std::get_if<EtcdSettings>(&spec.rdzv)) {
    out += "  etcd:    " + etcd->Describe() + "\n";
  }
  if (!spec.job_secret.empty()) out += "  secret:  " + SecretText(spec) + "\n";
  if (!spec.store_allow.empty()) out += "  allow:   " + Join(AllowList(spec), ", ") + "\n";
  if (const std::string via = StoreTraffic(spec); !via.empty()) out += "  ranks:   " + via + "\n";
  if (spec.metrics_port) out += "  metrics: " + MetricsUrl(spec) + "\n";
  out += "  device:  " + spec.profile.name + " (backend " + spec.profile.backend + ")\n";
  std::string cards = "none";
  if (!spec.device_pool.empty()) {
    cards.clear();
    for (const std::string& id : spec.device_pool) cards += (cards.empty() ? "" : ",") + id;
    cards +=
        " (" + spec.pool_source + "), --bind " + (spec.bind == DeviceBind::kAll ? "all" : "rank");
  }
  out += "  cards:   " + cards + "\n";
  out += "  run id:  " + DryRunRuntime(spec).run_id + "\n";
  if (!spec.interpreter_shim.empty()) out += "  python:  " + DescribeInterpreter(spec) + "\n";
  out += "  torch:   " + DescribeRanksTorch(spec.ranks_torch) + "\n";
  if (const std::string logs = DryRunRuntime(spec).log_root; !logs.empty()) {
    out += "  logs:    " + logs + "\n";
  }
  for (FilteredStream stream : {FilteredStream::kStdout, FilteredStream::kStderr}) {
    if (std::string text = FilteredText(spec, stream); !text.empty()) {
      out += "  filters: " + text + "\n";
    }
  }
  const std::vector<RankView> ranks = Ranks(spec, base);
  std::vector<std::string> notes = spec.notes;
  if (std::string note = UnchangedNote(ranks); !note.empty()) notes.push_back(std::move(note));
  if (!notes.empty()) {
    out += "notes:\n";
    for (const std::string& note : notes) out += "  - " + note + "\n";
  }
  for (const RankView& view : ranks) {
    out += "rank " + std::to_string(view.rank) + " (local rank " + std::to_string(view.local_rank) +
           "):\n";
    out += "  argv: " + CommandLine(view.argv) + "\n";
    if (!spec.log_line_prefix_template.empty()) {
      out += "  console prefix: " + ShellQuote(view.console_prefix) + "\n";
    }
    if (static_cast<size_t>(view.local_rank) < spec.rank_cpus.size()) {
      const auto rank = static_cast<size_t>(view.local_rank);
      out += "  cpus: " + FormatCpuList(spec.rank_cpus[rank]) + " (" + spec.rank_cpus_where[rank] +
             ")\n";
    }
    out += "  env:\n";
    for (const auto& [key, value] : view.env) out += "    " + key + "=" + ShellWord(value) + "\n";
  }
  return out;
}

}  // namespace

RankRuntime DryRunRuntime(const LaunchSpec& spec) {
  return ResolveRankRuntime(spec,
                            LaunchChoices{kPortPlaceholder, kRunIdPlaceholder, kScratchPlaceholder,
                                          kLauncherPidPlaceholder, kProxyPortPlaceholder});
}

std::string ShellQuote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

std::string RenderDryRun(const LaunchSpec& spec, const EnvMap& base, DryRunFormat format) {
  switch (format) {
    case DryRunFormat::kJson:
      return RenderJson(spec, base);
    case DryRunFormat::kEnv:
      return RenderEnv(spec, base);
    case DryRunFormat::kTable:
      break;
  }
  return RenderTable(spec, base);
}

std::string RenderDryRun(const LaunchSpec& spec, const EnvMap& base) {
  return RenderDryRun(spec, base, spec.dry_run_format);
}

}  // namespace gculaunch
