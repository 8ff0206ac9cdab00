#include "launcher/run/rank_planner.h"

#include <algorithm>
#include <filesystem>
#include <random>

#include "launcher/frontend/stack_hook.h"

namespace gculaunch {

namespace fs = std::filesystem;

namespace {

bool Feeds(const std::vector<int>& local_ranks, int lr) {
  return std::find(local_ranks.begin(), local_ranks.end(), lr) != local_ranks.end();
}

}  // namespace

std::string ScriptOf(const std::vector<std::string>& rank_argv, const LaunchSpec& spec) {
  if (spec.python.empty() || rank_argv.size() < 3 || rank_argv[1] != "-u") return "";
  if (rank_argv[2] == "-m" || rank_argv[2] == "-c" || rank_argv[2] == "-") return "";
  return rank_argv[2];
}

std::string NewRunId() {
  std::random_device random;
  std::uniform_int_distribution<int> hex(0, 15);
  std::string id;
  for (int i = 0; i < 32; ++i) {
    if (i == 8 || i == 12 || i == 16 || i == 20) id += '-';
    id += "0123456789abcdef"[hex(random)];
  }
  return id;
}

void RankPlanner::ApplyLayout(const Layout& layout) {
  spec_.rank_offset = layout.rank_offset;
  spec_.world_size = layout.world_size;
  spec_.node_rank = layout.node_rank;
  spec_.nnodes = layout.nnodes;
  restarts_ = layout.restarts;
  // --store-proxy: the ranks' store is this node's proxy (runtime_.master_addr), whatever port
  // node 0 serves it on.
  if (runtime_.master_addr.empty()) runtime_.master_port = layout.ranks_port;
  if (!layout.master_addr.empty()) spec_.master_addr = layout.master_addr;
}

Result<std::vector<RankLaunch>> RankPlanner::PlanAttempt(int restart_count) {
  planned_ = Planned{spec_.world_size, restarts_ >= 0 ? restarts_ : restart_count};
  std::vector<RankLaunch> ranks;
  // --duplicate-*-filters: the local ranks whose lines are matched against the filters.
  const std::vector<int> stdout_feeders = FilteredLocalRanks(spec_, FilteredStream::kStdout);
  const std::vector<int> stderr_feeders = FilteredLocalRanks(spec_, FilteredStream::kStderr);
  for (int lr = 0; lr < spec_.nproc_per_node; ++lr) {
    RankLaunch r;
    r.local_rank = lr;
    r.rank = spec_.rank_offset + lr;
    r.console_prefix = ConsolePrefix(spec_, lr);
    r.program = spec_.executable;
    r.argv = BuildRankArgv(spec_, lr);
    EnvMap env = BuildRankEnv(spec_, base_, lr, restart_count, runtime_);
    // An elastic job's epochs (the attempts) include re-forms that used no restart.
    if (restarts_ >= 0) env.Set("TORCHELASTIC_RESTART_COUNT", std::to_string(restarts_));
    r.env = env.ToStrings();
    r.error_file = RankErrorFile(runtime_, restart_count, lr);
    if (spec_.stack_dumps) {
      r.stack_file = RankStackFile(runtime_, restart_count, lr);
      r.stack_signal = spec_.stack_dump_signal;
    }
    if (spec_.hang_timeout_s > 0) r.heartbeat_file = RankHeartbeatFile(runtime_, restart_count, lr);
    if (static_cast<size_t>(lr) < spec_.rank_cpus.size()) {
      r.cpus = spec_.rank_cpus[static_cast<size_t>(lr)];
    }

    // A fresh attempt directory; an error file found there is stale and goes (each run has
    // its own private directory, so only a caller reusing a root can leave one).
    const fs::path dir = fs::path(r.error_file).parent_path();
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
      return Error{"cannot create " + dir.string() + ": " + ec.message(), "check TMPDIR"};
    }
    fs::remove(r.error_file, ec);
    if (ec) {
      return Error{"cannot remove the stale error file " + r.error_file + ": " + ec.message(),
                   "remove it by hand"};
    }
    if (log_dir_) {
      // torchrun's layout in the log directory, reached through its descriptor only.
      const std::string rank_dir =
          "attempt_" + std::to_string(restart_count) + "/" + std::to_string(lr);
      if (Status made = log_dir_->MakeDirs(rank_dir); !made.ok()) {
        return Error{made.error().what, "choose a writable --log-dir"};
      }
      r.log_dir = log_dir_;
      const int logged = LoggedStreams(spec_, lr);
      if ((logged & StdStreams::kStdout) != 0) r.stdout_log = rank_dir + "/stdout.log";
      if ((logged & StdStreams::kStderr) != 0) r.stderr_log = rank_dir + "/stderr.log";
      r.error_file_copy = rank_dir + "/error.json";
      // torchrun's filtered files: one per attempt for all its ranks, made whenever there are
      // filters, even if no rank feeds it.
      const std::string attempt_dir = "attempt_" + std::to_string(restart_count) + "/";
      if (!spec_.duplicate_stdout_filters.empty()) {
        r.filtered_stdout_log = attempt_dir + FilteredLogName(FilteredStream::kStdout);
      }
      if (!spec_.duplicate_stderr_filters.empty()) {
        r.filtered_stderr_log = attempt_dir + FilteredLogName(FilteredStream::kStderr);
      }
      if (Feeds(stdout_feeders, lr)) r.stdout_filters = spec_.duplicate_stdout_filters;
      if (Feeds(stderr_feeders, lr)) r.stderr_filters = spec_.duplicate_stderr_filters;
    }
    const bool shown = spec_.console_local_ranks.empty() ||
                       std::find(spec_.console_local_ranks.begin(), spec_.console_local_ranks.end(),
                                 lr) != spec_.console_local_ranks.end();
    // torchrun's rule: a stream reaches the console unless it is redirected and not teed.
    const int redirected = spec_.redirects.For(lr);
    const int teed = spec_.tee.For(lr);
    r.stdout_to_console =
        shown && (!(redirected & StdStreams::kStdout) || (teed & StdStreams::kStdout));
    r.stderr_to_console =
        shown && (!(redirected & StdStreams::kStderr) || (teed & StdStreams::kStderr));
    if (lr == 0 && spec_.stdin_mode == StdinMode::kRank0) {
      r.inherit_stdin = true;
      r.take_terminal = rank0_takes_terminal_;
    }
    ranks.push_back(std::move(r));
  }
  return ranks;
}

}  // namespace gculaunch
