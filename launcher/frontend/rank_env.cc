#include "launcher/frontend/rank_env.h"

#include <algorithm>
#include <utility>

#include "base/text.h"
#include "launcher/frontend/cli.h"
#include "launcher/frontend/cpu_list.h"
#include "launcher/frontend/etcd_settings.h"
#include "launcher/frontend/launch_spec.h"
#include "launcher/frontend/python_shim.h"
#include "launcher/frontend/ranks_torch.h"
#include "launcher/frontend/stack_hook.h"

namespace gculaunch {
namespace {

bool IsIdentifierStart(char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool IsIdentifierChar(char c) { return IsIdentifierStart(c) || (c >= '0' && c <= '9'); }

// torchrun substitutes with Python's string.Template(text).safe_substitute(...), so the same
// rules apply here: "${name}" and "$name" (the longest identifier after '$') of a name in
// `values` become its value, "$$" becomes "$", and every other "$" sequence stays as it is.
std::string SafeSubstitute(const std::string& text,
                           const std::vector<std::pair<std::string, std::string>>& values) {
  auto lookup = [&values](const std::string& name) -> const std::string* {
    for (const auto& [key, value] : values) {
      if (key == name) return &value;
    }
    return nullptr;
  };
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text[i] != '$' || i + 1 == text.size()) {
      out += text[i++];
      continue;
    }
    const char next = text[i + 1];
    if (next == '$') {
      out += '$';
      i += 2;
    } else if (IsIdentifierStart(next)) {
      size_t end = i + 1;
      while (end < text.size() && IsIdentifierChar(text[end])) ++end;
      const std::string* value = lookup(text.substr(i + 1, end - i - 1));
      out += value != nullptr ? *value : text.substr(i, end - i);
      i = end;
    } else if (next == '{') {
      const size_t close = text.find('}', i + 2);
      const std::string* value =
          close == std::string::npos ? nullptr : lookup(text.substr(i + 2, close - i - 2));
      if (value != nullptr) {
        out += *value;
        i = close + 1;
      } else {
        out += '$';
        ++i;
      }
    } else {
      out += '$';
      ++i;
    }
  }
  return out;
}

std::string JoinPool(const std::vector<std::string>& pool) {
  std::string out;
  for (const std::string& id : pool) {
    if (!out.empty()) out += ",";
    out += id;
  }
  return out;
}

void SetDefault(EnvMap& env, const std::string& key, const std::string& value) {
  if (!env.Has(key)) env.Set(key, value);
}

}  // namespace

RankRuntime ResolveRankRuntime(const LaunchSpec& spec, const LaunchChoices& choices) {
  RankRuntime runtime;
  runtime.master_port =
      spec.master_port != 0 ? std::to_string(spec.master_port) : choices.chosen_port;
  runtime.run_id = !spec.run_id.empty() ? spec.run_id : choices.generated_run_id;
  runtime.rank_file_root = choices.scratch_dir;
  runtime.log_root = RunLogRoot(spec, runtime.run_id);
  runtime.launcher_pid = choices.launcher_pid;
  if (ProxiesStore(spec)) {
    runtime.master_addr = kProxyAddress;
    runtime.master_port = choices.proxy_port;
  }
  return runtime;
}

bool ProxiesStore(const LaunchSpec& spec) {
  return spec.store_proxy && spec.nnodes > 1 && spec.node_rank != 0 &&
         spec.store_mode == StoreMode::kAgent;
}

std::vector<std::string> OwnedRankVariables(const DeviceProfile& profile) {
  std::vector<std::string> owned = {"LOCAL_RANK",
                                    "RANK",
                                    "GROUP_RANK",
                                    "ROLE_RANK",
                                    "ROLE_NAME",
                                    "LOCAL_WORLD_SIZE",
                                    "WORLD_SIZE",
                                    "GROUP_WORLD_SIZE",
                                    "ROLE_WORLD_SIZE",
                                    "MASTER_ADDR",
                                    "MASTER_PORT",
                                    "TORCHELASTIC_RESTART_COUNT",
                                    "TORCHELASTIC_MAX_RESTARTS",
                                    "TORCHELASTIC_RUN_ID",
                                    "TORCHELASTIC_USE_AGENT_STORE",
                                    "TORCHELASTIC_ERROR_FILE",
                                    "GCULAUNCH_DEVICE",
                                    "GCULAUNCH_DEVICE_INDEX",
                                    "GCULAUNCH_BACKEND",
                                    "GCULAUNCH_CPUS"};
  owned.insert(owned.end(), PythonShimVariables().begin(), PythonShimVariables().end());
  owned.insert(owned.end(), StackHookVariables().begin(), StackHookVariables().end());
  owned.insert(owned.end(), profile.visible_env.begin(), profile.visible_env.end());
  return owned;
}

std::vector<std::string> RankContractVariables(const LaunchSpec& spec) {
  std::vector<std::string> vars = OwnedRankVariables(spec.profile);
  for (const char* var : {"PYTHONUNBUFFERED", "OMP_NUM_THREADS", "PYTHONFAULTHANDLER"}) {
    vars.emplace_back(var);
  }
  for (std::string& var : NcclErrorHandlingVariables(spec.ranks_torch)) {
    vars.push_back(std::move(var));
  }
  for (const auto& [key, value] : spec.profile.env) vars.push_back(key);
  for (const auto& [key, value] : spec.extra_env) vars.push_back(key);
  for (const auto& [key, value] : spec.interpreter_env) vars.push_back(key);
  std::sort(vars.begin(), vars.end());
  vars.erase(std::unique(vars.begin(), vars.end()), vars.end());
  return vars;
}

namespace {

// The etcd password never reaches a rank (docs/security.md): GCULAUNCH_ETCD_PASSWORD is
// gculaunch's own, and the password= item of PET_RDZV_CONF (with the ','-separated pieces of it
// that follow: items that are not one of the keys) is cut out of the ranks' copy; nothing left,
// no copy.
void RemoveEtcdPassword(EnvMap& env) {
  env.Erase(kEtcdPasswordEnv);
  const auto conf = env.Get("PET_RDZV_CONF");
  if (!conf) return;
  std::string kept;
  bool in_password = false;
  for (const std::string& item : Split(*conf, ',')) {
    const size_t eq = item.find('=');
    if (eq != std::string::npos && eq != 0 && IsRdzvConfKey(item.substr(0, eq))) {
      in_password = item.compare(0, eq, "password") == 0;
    }
    if (in_password) continue;
    kept += (kept.empty() ? "" : ",") + item;
  }
  if (kept.empty()) {
    env.Erase("PET_RDZV_CONF");
  } else {
    env.Set("PET_RDZV_CONF", kept);
  }
}

}  // namespace

EnvMap BuildRankEnv(const LaunchSpec& spec, const EnvMap& base, int local_rank, int restart_count,
                    const RankRuntime& runtime) {
  // Layers, lowest first: profile, the user's environment, --env.
  EnvMap env;
  for (const auto& [key, value] : spec.profile.env) env.Set(key, value);
  for (const auto& [key, value] : base.vars()) env.Set(key, value);
  for (const auto& [key, value] : spec.extra_env) env.Set(key, value);
  // A shim's interpreter runs directly: the ranks get what the shim's exec would export.
  for (const auto& [key, value] : spec.interpreter_env) env.Set(key, value);
  RemoveEtcdPassword(env);
  // Where the job secret lives is not itself secret, but a rank has no use for it either.
  env.Erase(kJobSecretFileEnv);

  // Defaults that yield to any value already present (torchrun keeps the
  // agent's NCCL_ASYNC_ERROR_HANDLING and OMP_NUM_THREADS the same way).  The NCCL
  // error-handling name is the one the ranks' torch's torchrun sets (ranks_torch.h).
  for (const std::string& var : NcclErrorHandlingVariables(spec.ranks_torch)) {
    SetDefault(env, var, "1");
  }
  SetDefault(env, "PYTHONUNBUFFERED", "1");
  // A crash in C code (SIGSEGV, SIGABRT, SIGBUS, ...) still prints the Python stack.
  if (spec.python_faulthandler) SetDefault(env, "PYTHONFAULTHANDLER", "1");
  const bool pinned = static_cast<size_t>(local_rank) < spec.rank_cpus.size();
  if (pinned) {
    // --cpu-affinity: as many threads as the rank has CPUs.
    const size_t cpus = spec.rank_cpus[static_cast<size_t>(local_rank)].size();
    SetDefault(env, "OMP_NUM_THREADS", std::to_string(std::max<size_t>(cpus, 1)));
  } else if (!spec.omp_num_threads_default.empty()) {
    SetDefault(env, "OMP_NUM_THREADS", spec.omp_num_threads_default);
  }

  // torchrun's per-rank contract (docs/worker-environment.md §1).
  // One role per launch, so the ROLE_* values equal the global ones.
  const int rank = spec.rank_offset + local_rank;
  // --virtual-local-rank: each rank sees one card, device 0, and torch 2.10's LOCAL_RANK=0.
  env.Set("LOCAL_RANK", spec.virtual_local_rank ? "0" : std::to_string(local_rank));
  env.Set("RANK", std::to_string(rank));
  env.Set("GROUP_RANK", std::to_string(spec.node_rank));
  env.Set("ROLE_RANK", std::to_string(rank));
  env.Set("ROLE_NAME", spec.role);
  env.Set("LOCAL_WORLD_SIZE", std::to_string(spec.nproc_per_node));
  env.Set("WORLD_SIZE", std::to_string(spec.world_size));
  env.Set("GROUP_WORLD_SIZE", std::to_string(spec.nnodes));
  env.Set("ROLE_WORLD_SIZE", std::to_string(spec.world_size));
  env.Set("MASTER_ADDR", runtime.master_addr.empty() ? spec.master_addr : runtime.master_addr);
  env.Set("MASTER_PORT", runtime.master_port);
  env.Set("TORCHELASTIC_RESTART_COUNT", std::to_string(restart_count));
  env.Set("TORCHELASTIC_MAX_RESTARTS", std::to_string(spec.max_restarts));
  env.Set("TORCHELASTIC_RUN_ID", runtime.run_id);
  env.Set("TORCHELASTIC_USE_AGENT_STORE", spec.store_mode == StoreMode::kAgent ? "True" : "False");
  env.Set("TORCHELASTIC_ERROR_FILE", RankErrorFile(runtime, restart_count, local_rank));

  // Devices.
  const auto& pool = spec.device_pool;
  if (!pool.empty()) {
    const int cards = static_cast<int>(pool.size());
    std::string visible;
    std::string device;
    int index = 0;
    if (spec.bind == DeviceBind::kRank) {
      // MakeLaunchSpec rejects a real launch with too few cards; only a dry
      // run gets here without a card for this rank.
      device = local_rank < cards ? pool[local_rank] : kNoCardLeft;
      visible = device;
      index = 0;
    } else {
      visible = JoinPool(pool);
      device = pool[local_rank % cards];
      index = local_rank % cards;
    }
    for (const std::string& var : spec.profile.visible_env) env.Set(var, visible);
    env.Set("GCULAUNCH_DEVICE", device);
    env.Set("GCULAUNCH_DEVICE_INDEX", std::to_string(index));
  } else {
    // No cards: a value inherited from an outer gculaunch would be wrong here.
    env.Erase("GCULAUNCH_DEVICE");
    env.Erase("GCULAUNCH_DEVICE_INDEX");
  }
  env.Set("GCULAUNCH_BACKEND", spec.profile.backend);
  if (pinned) {
    env.Set("GCULAUNCH_CPUS", FormatCpuList(spec.rank_cpus[static_cast<size_t>(local_rank)]));
  } else {
    env.Erase("GCULAUNCH_CPUS");
  }
  if (spec.python_shim) {
    AddPythonShimEnv(spec, runtime, env);
  } else {
    for (const std::string& var : PythonShimVariables()) env.Erase(var);
  }
  // torchrun propagates TORCHELASTIC_TIMER_FILE; with the watchdog on, it names the FIFO.
  if (spec.file_timer) env.Set("TORCHELASTIC_TIMER_FILE", FileTimerPath(spec, runtime));
  // After the shim: the hook comes first on PYTHONPATH and chains to the shim.
  if (spec.stack_dumps) {
    AddStackHookEnv(spec, runtime, local_rank, restart_count, env);
  } else {
    for (const std::string& var : StackHookVariables()) env.Erase(var);
  }
  return env;
}

std::string FileTimerPath(const LaunchSpec& spec, const RankRuntime& runtime) {
  if (!spec.file_timer) return "";
  return spec.file_timer_path.empty() ? runtime.rank_file_root + "/watchdog_timer"
                                      : spec.file_timer_path;
}

std::vector<std::string> BuildRankArgv(const LaunchSpec& spec, int local_rank) {
  std::vector<std::string> argv = spec.argv;
  const std::vector<std::pair<std::string, std::string>> values = {
      {"local_rank", std::to_string(local_rank)}};
  for (size_t i = 1; i < argv.size(); ++i) argv[i] = SafeSubstitute(argv[i], values);
  return argv;
}

std::string ConsolePrefix(const LaunchSpec& spec, int local_rank) {
  const int rank = spec.rank_offset + local_rank;
  if (spec.log_line_prefix_template.empty()) return "[rank" + std::to_string(rank) + "]: ";
  // torch's LocalElasticAgent: Template(template).safe_substitute(role_name=, rank=,
  // local_rank=); the result is written before each line as it is (no space added).
  return SafeSubstitute(spec.log_line_prefix_template,
                        {{"role_name", spec.role},
                         {"rank", std::to_string(rank)},
                         {"local_rank", std::to_string(local_rank)}});
}

std::string RankErrorFile(const RankRuntime& runtime, int restart_count, int local_rank) {
  return runtime.rank_file_root + "/attempt_" + std::to_string(restart_count) + "/" +
         std::to_string(local_rank) + "/error.json";
}

}  // namespace gculaunch
