#!/usr/bin/env bash
# start_multinode_platform.sh - the startup script a job platform runs on every node.
#
#   start_multinode_platform.sh [GCULAUNCH_OPTIONS] SCRIPT [SCRIPT_ARGS...]
#
# Job platforms (KubeBrain, Volcano, Kubeflow, Kubernetes Jobs, Slurm) run one command on
# every node and describe the job in environment variables: WORLD_SIZE = number of nodes,
# RANK = this node's index, MASTER_ADDR, MASTER_PORT (or PET_*, SLURM_*, OMPI_*).  gculaunch
# reads them itself (docs/command-line.md, "Job platforms"), so this script computes nothing:
# it activates the ranks' Python environment if asked to, then execs gculaunch with its own
# arguments.  The platform's variables reach gculaunch unchanged.
#
# Optional settings (environment):
#   GCULAUNCH_VENV       a virtualenv directory; its bin/activate is sourced
#   GCULAUNCH_CONDA_ENV  a conda environment (name or path) to activate
#   GCULAUNCH_CONDA_SH   conda's shell hook, <conda install>/etc/profile.d/conda.sh; needed
#                        when the `conda` shell function is not defined already
#   GCULAUNCH_BIN        the gculaunch to run; default: gculaunch on PATH
#
# Examples (the platform's "startup command"):
#   start_multinode_platform.sh --nproc-per-node 8 --device gcu train.py --config cfg.py
#   GCULAUNCH_CONDA_SH=<conda install>/etc/profile.d/conda.sh GCULAUNCH_CONDA_ENV=tiny-vae \
#     start_multinode_platform.sh --nproc-per-node 8 train.py
# What each node would start, without starting anything:
#   start_multinode_platform.sh --dry-run --nproc-per-node 8 train.py
#
# A bad setting is one line on stderr and exit code 2 (gculaunch's usage error).
set -euo pipefail

die() {
  echo "start_multinode_platform.sh: $1" >&2
  exit 2
}

if [[ $# -eq 0 ]]; then
  die "no arguments (fix: start_multinode_platform.sh [GCULAUNCH_OPTIONS] SCRIPT [ARGS...], e.g. --nproc-per-node 8 train.py)"
fi
venv=${GCULAUNCH_VENV:-}
conda_env=${GCULAUNCH_CONDA_ENV:-}
conda_sh=${GCULAUNCH_CONDA_SH:-}
if [[ -n $venv && -n $conda_env ]]; then
  die "GCULAUNCH_VENV and GCULAUNCH_CONDA_ENV are both set (fix: set only one of them)"
fi
if [[ -n $conda_sh && -z $conda_env ]]; then
  die "GCULAUNCH_CONDA_SH is set but GCULAUNCH_CONDA_ENV is not (fix: set GCULAUNCH_CONDA_ENV to the environment to activate)"
fi

# Activation scripts are not written for `set -u`: relax it while they run.
if [[ -n $venv ]]; then
  if [[ ! -f $venv/bin/activate ]]; then
    die "GCULAUNCH_VENV=$venv has no bin/activate (fix: give the virtualenv's directory)"
  fi
  set +u
  # shellcheck disable=SC1091
  source "$venv/bin/activate"
  set -u
fi
if [[ -n $conda_env ]]; then
  if [[ -n $conda_sh ]]; then
    if [[ ! -f $conda_sh ]]; then
      die "GCULAUNCH_CONDA_SH=$conda_sh: no such file (fix: give <conda install>/etc/profile.d/conda.sh)"
    fi
    set +u
    # shellcheck disable=SC1090
    source "$conda_sh"
    set -u
  fi
  if ! declare -F conda >/dev/null; then
    die "GCULAUNCH_CONDA_ENV=$conda_env but conda's shell function is not defined (fix: set GCULAUNCH_CONDA_SH=<conda install>/etc/profile.d/conda.sh)"
  fi
  set +u
  if ! conda activate "$conda_env"; then
    die "conda activate $conda_env failed (fix: check GCULAUNCH_CONDA_ENV against conda env list)"
  fi
  set -u
fi

gculaunch=${GCULAUNCH_BIN:-gculaunch}
if ! command -v "$gculaunch" >/dev/null; then
  die "$gculaunch: not found (fix: put gculaunch on PATH, or set GCULAUNCH_BIN to its path)"
fi
exec "$gculaunch" "$@"
