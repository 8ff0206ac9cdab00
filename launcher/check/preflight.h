// RunPreflight: `gculaunch check`, the answer to "will this node run my job?".
//
// Input is the LaunchSpec the launch itself would use (same flags, PET_*
// variables, device profile, card pool and interpreter resolution; built
// with dry-run leniency so that a missing card or interpreter becomes a
// failed check instead of a usage error).  Output is a list of checks, each
// ok / warn / fail with one line of evidence and, unless ok, one line saying
// what to do.  Checks that do not apply (no driver named by the profile, no
// vendor module, a single node without an interface variable) are left out.
//
//   interpreter    the Python the ranks would run (resolved path and how it was chosen)
//   cards          device files found vs ranks asked for (or the pool from the environment)
//   driver         the profile's driver_path exists (e.g. /sys/module/enflame)
//   library        the profile's collective_library (libeccl.so*) in LD_LIBRARY_PATH, the
//                  dynamic linker's cache (<sysroot>/etc/ld.so.cache) or the default dirs
//   python-probe   the probe child ran (time-limited; its process group is killed on timeout)
//   torch          `import torch` and its version
//   vendor-module  `import torch_gcu` (the profile's python_module) and its device count
//   backend        torch.distributed knows the profile's backend after the vendor import
//                  (for eccl this is exactly the "Invalid backend: 'eccl'" failure)
//   master-addr    the master address resolves
//   master-port    node 0: the port is free to listen on; other nodes: it accepts connections
//   interface      the interface(s) named by the profile's socket-ifname variable exist
//
// The probe runs with exactly rank 0's environment (BuildRankEnv) and
// interpreter.  All OS access goes through the injected tools, so tests use
// fake trees (--sysroot), fake runners and loopback sockets.
//
// Thread safety: RunPreflight blocks (the probe, connects); tools are used
// from the calling thread only.  The render functions are pure.
#pragma once

#include <string>
#include <vector>

#include "base/env_map.h"
#include "launcher/check/net_probe.h"
#include "launcher/frontend/device_profile.h"
#include "launcher/frontend/launch_spec.h"
#include "launcher/sys/command_runner.h"

namespace gculaunch {

enum class CheckStatus { kOk, kWarn, kFail };

struct CheckItem {
  std::string name;  ///< e.g. "backend"
  CheckStatus status = CheckStatus::kOk;
  std::string evidence;  ///< one line: what was found
  std::string fix;       ///< one line: what to do (empty when ok)
};

struct CheckReport {
  std::string device;              ///< profile name
  std::string backend;             ///< profile backend
  std::string interpreter;         ///< resolved interpreter ("" with --no-python)
  std::string interpreter_source;  ///< "--python", "PYTHON_EXEC", "python3 on PATH", ...
  int nnodes = 1;
  int node_rank = 0;
  int nproc_per_node = 1;
  std::vector<CheckItem> items;

  int Failed() const;
  int Warnings() const;
};

/// The OS access RunPreflight uses; all borrowed for the call.
struct PreflightTools {
  const DeviceProbe& probe;     ///< /dev, /sys, /etc/ld.so.cache, library dirs, /sys/class/net
  const FileAccess& files;      ///< is the interpreter executable
  const CommandRunner& runner;  ///< the Python probe
  const NetworkProbe& net;      ///< resolve, listen, connect
};

struct PreflightSettings {
  std::string interpreter_source;  ///< how the interpreter was chosen, printed with it
  double probe_timeout_s = 20;     ///< the Python probe is killed after this
  double connect_timeout_s = 3;    ///< per address, non-master nodes
};

/// Runs every applicable check.  `base_env` is gculaunch's own environment.
CheckReport RunPreflight(const LaunchSpec& spec, const EnvMap& base_env,
                         const PreflightTools& tools, const PreflightSettings& settings);

/// People: a header, one line per check (plus a "fix:" line unless ok), a result line.
std::string RenderCheckText(const CheckReport& report);
/// Machines: {"device", "backend", "interpreter", "interpreter_source", "nnodes",
/// "node_rank", "nproc_per_node", "checks": [{"name", "status" ("ok"|"warn"|"fail"),
/// "evidence", "fix"}], "failed", "warnings", "ok"}.
std::string RenderCheckJson(const CheckReport& report);

/// The Python source of the probe.  Run as `python -c SOURCE BACKEND MODULE`; it
/// prints one line "GCULAUNCH_PROBE {json}" with python, torch / torch_error,
/// module / module_error / module_devices, backend_ok / backend_error.
const char* PythonProbeSourceForTest();

}  // namespace gculaunch
