// ReadPlatform: a job platform's variables -> PlatformInfo, and the layout line.
//
// On a job platform every node runs the same command, and the platform tells
// each copy which job it belongs to through environment variables -- each
// platform with different ones.  torchrun reads only PET_*, which is why every
// platform wraps it in shell; gculaunch reads the platforms' own variables.
//
// Precedence, per value (number of nodes, node rank, master address, master
// port), highest first:
//   1. flags        --nnodes --node-rank --master-addr --master-port --rdzv-endpoint
//   2. PET_*        PET_NNODES PET_NODE_RANK PET_MASTER_ADDR PET_MASTER_PORT ... (newer
//                   Kubeflow PyTorchJob, Kubeflow Trainer); ParseCli reads them as the
//                   flags' fallbacks and ReadPlatform takes them from CliOptions: no
//                   PET_ variable is read twice
//   3. Slurm step   SLURM_STEP_NUM_TASKS (else SLURM_NTASKS) nodes, SLURM_PROCID node rank,
//                   master = first host of SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST,
//                   SLURM_NODELIST), MASTER_PORT
//   4. Open MPI     OMPI_COMM_WORLD_SIZE nodes, OMPI_COMM_WORLD_RANK node rank,
//                   MASTER_ADDR, MASTER_PORT
//   5. WORLD_SIZE   WORLD_SIZE nodes (or processes: --platform-world-size procs),
//                   RANK node rank, MASTER_ADDR, MASTER_PORT (Volcano, KubeBrain,
//                   older Kubeflow)
//   6. gculaunch's defaults (1 node, node 0, 127.0.0.1, port 29500)
// Of levels 3-5 only the highest one present is read (as a whole); the others
// are named in a note.  Values a flag or PET_ variable already gives are not
// read (nor checked) from the platform.  Empty variables count as unset.
//
// Rules for each level:
//   * Slurm: only inside a step (SLURM_STEP_ID set, i.e. under srun), never in a
//     bare salloc/sbatch shell (a note says so).  One gculaunch per node: the
//     step's task count must equal its node count (srun --ntasks-per-node=1).
//     If Open MPI's variables are present too (mpirun inside an allocation),
//     both must agree.
//   * Open MPI: one copy per node (OMPI_COMM_WORLD_LOCAL_SIZE 1, i.e. mpirun
//     --map-by ppr:1:node); more than one node needs MASTER_ADDR (mpirun -x).
//   * WORLD_SIZE/RANK -- guards against stray variables (an interactive pod
//     shell, an salloc shell, a parent launcher): the level is ignored, with a
//     warning, when MASTER_ADDR is missing, or when TORCHELASTIC_RUN_ID or
//     LOCAL_RANK is set (the variables are a parent launcher's).
//   * --standalone ignores every platform variable (a warning when they
//     describe more than one node, else a note).
// Inconsistent or malformed values are a one-line Error naming what was read
// from where and the fix; the caller exits with exit_code::kUsage.
//
// Ownership: the functions borrow their arguments for the call only and return
// values.  Thread safety: pure functions of their arguments.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/env_map.h"
#include "base/error.h"
#include "launcher/frontend/cli.h"
#include "launcher/frontend/types.h"

namespace gculaunch {

/// Topology read from a job platform's variables (Volcano, Kubeflow, Slurm,
/// Open MPI ...) by ReadPlatform (platform.h).  Set fields rank below the
/// command line and PET_* variables.  Each `*_from` names what was read, as the
/// layout line and error messages show it ("WORLD_SIZE=2 (nodes)", "RANK=1",
/// "MASTER_ADDR", "first host of SLURM_STEP_NODELIST").
struct PlatformInfo {
  std::string name;  ///< the layout read: "WORLD_SIZE/RANK", "Slurm step", "Open MPI"; empty: none
  std::optional<int> nnodes;
  std::string nnodes_from;
  std::optional<int> node_rank;
  std::string node_rank_from;
  std::optional<std::string> master_addr;
  std::string master_addr_from;
  std::optional<int> master_port;
  std::string master_port_from;
  std::vector<std::string> warnings;  ///< variables a guard ignored (LaunchSpec::warnings)
  std::vector<std::string> notes;     ///< variables present but not read, and why
};

/// Reads the job platform's variables from `env` (gculaunch's own
/// environment), below the flags and PET_* variables already in `options`.
Result<PlatformInfo> ReadPlatform(const EnvMap& env, const CliOptions& options);

/// Expands Slurm's compressed host list: "node[01-03,07],gpu-a[1-2]-ib" ->
/// node01 node02 node03 node07 gpu-a1-ib gpu-a2-ib.  Zero padding follows the
/// width of each range's first number; several bracket groups in one name
/// expand as a product (first group slowest).  Malformed lists (unbalanced or
/// nested brackets, empty names or items, non-numeric or reversed ranges, more
/// than a million hosts) are an Error whose `what` describes the problem only
/// (the caller names the variable).
Result<std::vector<std::string>> ExpandSlurmHostList(std::string_view list);

}  // namespace gculaunch
