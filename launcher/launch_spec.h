// LaunchSpec: everything needed to start this node's ranks, decided up front.
//
// MakeLaunchSpec() turns the parsed command line, the environment and the
// device probe into a LaunchSpec and does all cross-field validation; after
// it succeeds, nothing about the job is ambiguous any more.  The dry run
// prints a LaunchSpec and the real launch executes it: both call the same
// pure BuildRankEnv()/BuildRankArgv() (rank_env.h), which is what makes the
// dry run trustworthy.
//
// Values that only exist once a launch happens (a port picked at launch, a
// generated run id, the error-file directory) are not in the spec; they come
// in a RankRuntime (rank_env.h).
//
// Thread safety: a plain value.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/device_profile.h"

namespace gculaunch {

enum class DeviceBind { kAll, kRank };      ///< --bind all|rank
enum class StdinMode { kNull, kRank0 };     ///< --stdin null|rank0
enum class StoreMode {
  kAgent,  ///< gculaunch hosts the TCPStore; TORCHELASTIC_USE_AGENT_STORE=True
  kRank0,  ///< rank 0 hosts it (torch 1.13 --standalone); TORCHELASTIC_USE_AGENT_STORE=False
};

struct LaunchSpec {
  // ---- topology (torchrun's meanings) ----
  int nnodes = 1;
  int node_rank = 0;           ///< GROUP_RANK
  int nproc_per_node = 1;      ///< LOCAL_WORLD_SIZE
  int rank_offset = 0;         ///< RANK of this node's local rank 0
  int world_size = 1;          ///< WORLD_SIZE (all nodes)
  std::string master_addr = "127.0.0.1";
  int master_port = 0;         ///< 0: a free port is chosen (and kept bound) at launch
  bool standalone = false;
  std::string role = "default";
  std::string run_id;          ///< empty: generated at launch
  int max_restarts = 0;
  StoreMode store_mode = StoreMode::kAgent;
  int worker_port = 0;         ///< kRank0 across nodes: the port rank 0 binds (--worker-port)

  // ---- the ranks' program ----
  /// The command before per-rank substitution, e.g. {"/usr/bin/python3", "-u",
  /// "train.py", "cfg.py"}; `${local_rank}` in it is replaced per rank.
  std::vector<std::string> argv;
  bool local_rank_arg = false;  ///< append --local_rank=N (legacy torch.distributed.launch)
  std::string python;           ///< interpreter used; empty with --no-python

  // ---- devices ----
  DeviceProfile profile;
  std::vector<std::string> device_pool;  ///< card ids the ranks may use, in order
  std::string pool_source;               ///< where the pool came from, for notes/logs
  DeviceBind bind = DeviceBind::kAll;

  // ---- environment ----
  std::vector<std::pair<std::string, std::string>> extra_env;  ///< --env, in order (top layer)
  std::string omp_num_threads_default;  ///< set when the user has no OMP_NUM_THREADS; empty: none

  // ---- supervision and output ----
  double grace_period_s = 25.0;         ///< SIGTERM -> SIGKILL, on every stop path
  std::string log_dir;                  ///< per-rank log files; empty: none
  std::vector<int> console_local_ranks; ///< --local-ranks-filter; empty: all ranks
  StdinMode stdin_mode = StdinMode::kNull;
  std::string summary_json;             ///< --summary-json PATH; empty: none
  std::string error_file_parent;        ///< gculaunch's own TORCHELASTIC_ERROR_FILE; empty: none

  /// Explanations for the dry run and the start-up log ("no cards found,
  /// previewing 8 ranks"); never part of any value.
  std::vector<std::string> notes;
};

}  // namespace gculaunch
