#include "launcher/app/check_main.h"

#include <unistd.h>

#include <cstdio>
#include <string>
#include <utility>
#include <variant>

#include "base/exit_codes.h"
#include "launcher/check/etcd_check.h"
#include "launcher/check/health_check.h"
#include "launcher/check/net_probe.h"
#include "launcher/check/preflight.h"
#include "launcher/cluster/etcd/etcd_options.h"
#include "launcher/frontend/cli.h"
#include "launcher/frontend/device_profile.h"
#include "launcher/frontend/launch_spec.h"
#include "launcher/sys/command_runner.h"
#include "launcher/sys/device_probe.h"
#include "launcher/sys/local_files.h"
#include "launcher/sys/process_setup.h"

namespace gculaunch {
namespace {

constexpr const char* kHelp = R"(Usage: gculaunch check [FLAGS] [SCRIPT [SCRIPT_ARGS...]]

Preflight check: will this node run the job?  Takes the same flags (and PET_*
variables) as a launch, so `gculaunch check <your launch flags>` examines exactly
that launch.  Each check prints ok, warn or fail, one line of evidence and, unless
ok, one line saying what to do.

Checks: interpreter (the Python the ranks would run), cards (device files vs ranks),
driver, library (the collective library, e.g. libeccl.so, via LD_LIBRARY_PATH and
the dynamic linker's cache), torch, vendor-module (e.g. torch_gcu and its device
count), backend (torch.distributed knows e.g. 'eccl' after the vendor import),
master-addr (resolves), master-port (node 0: free to listen on; other nodes:
accepts connections), interface (the *_SOCKET_IFNAME variable names one that exists).
With --rdzv-backend etcd, instead of master-addr and master-port: etcd-endpoint (each
endpoint answers, with etcd's server and cluster version), etcd-auth (with
--rdzv-conf user=...: etcd accepts the user and password), etcd-write (a probe key
under <etcd_prefix>/<rdzv-id>/check/ is written with a lease, read back and deleted).

Flags that matter most:
  --device NAME|auto|PATH.yaml   device profile (default auto)
  --nproc-per-node N|auto        ranks on this node
  --nnodes N --node-rank R       topology (node 0 hosts the store)
  --master-addr A --master-port P
  --rdzv-backend etcd --rdzv-endpoint H:2379[,H:2379...] --rdzv-id JOB [--rdzv-conf K=V,...]
                                 check the etcd a job would keep its rendezvous in
  --python PATH                  interpreter (default $PYTHON_EXEC, else python3 on PATH)
  --env KEY=VALUE                variables for the ranks (e.g. LD_LIBRARY_PATH, ECCL_SOCKET_IFNAME)
  --job FILE.yaml                check the node for a job file's launch
  --sysroot DIR                  look for /dev, /sys and /etc/ld.so.cache below DIR
  --format text|json             report format (default text)

Exit codes: 0 nothing failed (warnings allowed), 1 a check failed, 2 usage error.
)";

std::string InterpreterSource(const CliOptions& options, const EnvMap& env) {
  if (options.no_python) return "--no-python";
  if (options.python) return options.Source("python");
  if (!env.GetOr("PYTHON_EXEC", "").empty()) return "PYTHON_EXEC";
  return "python3 on PATH";
}

}  // namespace

int CheckMain(const std::vector<std::string>& args, const EnvMap& env) {
  auto cli = ParseCli(args, env, CliParseMode{.script_optional = true});
  if (!cli.ok()) {
    std::fprintf(stderr, "%s\n", cli.error().Format().c_str());
    return exit_code::kUsage;
  }
  if (cli->action == CliAction::kHelp) {
    std::fputs(kHelp, stdout);
    return exit_code::kSuccess;
  }
  if (cli->action == CliAction::kVersion) {
    std::fputs(cli->text.c_str(), stdout);
    return exit_code::kSuccess;
  }
  CliOptions options = std::move(cli->options);
  if (options.format == DryRunFormat::kEnv) {
    const Error error{options.Source("format") + " 'env': gculaunch check prints text or json",
                      "use --format text or --format json"};
    std::fprintf(stderr, "%s\n", error.Format().c_str());
    return exit_code::kUsage;
  }
  const bool json = options.format == DryRunFormat::kJson;
  // The spec is built with dry-run leniency: no cards or no interpreter are
  // findings of the check, not usage errors.
  options.dry_run = true;
  // No SCRIPT: any name does, the check never runs it.  (swap, not
  // operator=: g++ 12 warns falsely, -Wrestrict, on assigning a short literal.)
  if (options.script.empty() && !options.job) {
    std::string placeholder(1, '-');
    options.script.swap(placeholder);
  }

  FileSystemDeviceProbe probe(options.sysroot.value_or("/"));
  LocalFileAccess files;
  auto spec = MakeLaunchSpec(options, env, probe, files);
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", spec.error().Format().c_str());
    return exit_code::kUsage;
  }
  LocalCommandRunner runner;
  LocalNetworkProbe net;
  PreflightSettings settings;
  settings.interpreter_source = InterpreterSource(options, env);
  CheckReport report = RunPreflight(*spec, env, {probe, files, runner, net}, settings);
  for (CheckItem& item : CheckHealth(*spec, env, probe)) report.items.push_back(std::move(item));
  if (const auto* etcd = std::get_if<EtcdSettings>(&spec->rdzv)) {
    const std::string probe_name = sys::HostName() + "-" + std::to_string(::getpid());
    const auto client_options = MakeEtcdClientOptions(*etcd);
    for (CheckItem& item : CheckEtcd(client_options, *etcd, probe_name)) {
      report.items.push_back(std::move(item));
    }
  }
  const std::string text = json ? RenderCheckJson(report) : RenderCheckText(report);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  return report.Failed() > 0 ? kCheckFailed : exit_code::kSuccess;
}

}  // namespace gculaunch
