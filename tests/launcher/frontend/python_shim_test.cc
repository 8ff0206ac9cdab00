#include "launcher/frontend/python_shim.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "launcher/frontend/cli.h"
#include "launcher/frontend/dry_run.h"
#include "tests/support/frontend_fakes.h"
#include "tests/support/test_util.h"

namespace gculaunch {
namespace {

using testing::FakeDeviceProbe;
using testing::FakeFileAccess;
using testing::TempDir;

using testing::ReadFile;

struct Fixture {
  FakeDeviceProbe probe;
  FakeFileAccess files;
  EnvMap env{{"PATH", "/usr/bin:/bin"}};

  Fixture() { files.executables["python3"] = "/usr/bin/python3"; }

  Result<LaunchSpec> TrySpec(const std::vector<std::string>& args) {
    auto cli = ParseCli(args, env);
    if (!cli.ok()) return cli.error();
    return MakeLaunchSpec(cli->options, env, probe, files);
  }
  LaunchSpec Spec(const std::vector<std::string>& args) {
    auto spec = TrySpec(args);
    if (!spec.ok()) FAIL(spec.error().Format());
    return std::move(*spec);
  }
  EnvMap Rank(const LaunchSpec& spec, int local_rank = 0) {
    LaunchChoices choices{"29500", "run1", "/scratch/gl-run", "4242"};
    return BuildRankEnv(spec, env, local_rank, 0, ResolveRankRuntime(spec, choices));
  }
};

TEST_CASE(
    "python shim: the embedded texts are launcher/frontend/python/python_shim/sitecustomize.py and "
    "the shared _gculaunch_site.py",
    "[python_shim]") {
  const std::string dir = std::string(GCULAUNCH_SOURCE_DIR) + "/launcher/frontend/python/";
  REQUIRE(PythonShimFiles().size() == 2);
  CHECK(PythonShimFiles()[0].first == "_gculaunch_site.py");
  CHECK(std::string(PythonShimFiles()[0].second) == ReadFile(dir + "_gculaunch_site.py"));
  CHECK(PythonShimFiles()[1].first == "sitecustomize.py");
  CHECK(std::string(PythonShimFiles()[1].second) == ReadFile(dir + "python_shim/sitecustomize.py"));
}

TEST_CASE("python shim: the ranks' variables", "[python_shim]") {
  Fixture f;
  f.probe.AddCards("enflame-gcu", "gcu", {0, 1});
  SECTION("GCU: the shim first on PYTHONPATH, torch_gcu as the vendor module") {
    f.env.Set("PYTHONPATH", "/opt/project");
    const LaunchSpec spec =
        f.Spec({"--device", "gcu", "--nproc-per-node", "2", "--python-shim", "train.py"});
    const EnvMap rank = f.Rank(spec, 1);
    CHECK(rank.GetOr("PYTHONPATH", "") == "/scratch/gl-run/python-shim:/opt/project");
    CHECK(rank.GetOr("GCULAUNCH_SHIM_PARENT", "") == "4242");
    CHECK(rank.GetOr("GCULAUNCH_SHIM_DIR", "") == "/scratch/gl-run/python-shim");
    CHECK(rank.GetOr("GCULAUNCH_SHIM_FALLBACK", "") == "1");
    CHECK(rank.GetOr("GCULAUNCH_SHIM_MODULE", "") == "torch_gcu");
    CHECK(rank.GetOr("GCULAUNCH_SHIM_PATCH_CUDA", "") == "1");
    CHECK(rank.GetOr("GCULAUNCH_SHIM_VISIBLE_ENV", "") == "TOPS_VISIBLE_DEVICES");
    CHECK(rank.GetOr("GCULAUNCH_BACKEND", "") == "eccl");
  }
  SECTION("cpu, no fallback, no PYTHONPATH of the user's, --log-dir") {
    const LaunchSpec spec = f.Spec({"--device", "cpu", "--python-shim", "--no-backend-fallback",
                                    "--log-dir", "/logs", "--run-id", "r7", "train.py"});
    const EnvMap rank = f.Rank(spec);
    // Never below --log-dir, which another user may control: gculaunch's private directory.
    CHECK(rank.GetOr("PYTHONPATH", "") == "/scratch/gl-run/python-shim");
    CHECK(rank.GetOr("GCULAUNCH_SHIM_FALLBACK", "") == "0");
    CHECK(rank.GetOr("GCULAUNCH_SHIM_MODULE", "-") == "");
    CHECK(rank.GetOr("GCULAUNCH_SHIM_PATCH_CUDA", "") == "1");
    CHECK(rank.GetOr("GCULAUNCH_SHIM_VISIBLE_ENV", "-") == "");
  }
  SECTION("CUDA keeps torch.cuda as it is") {
    const LaunchSpec spec = f.Spec(
        {"--device", "cuda", "--nproc-per-node", "2", "--dry-run", "--python-shim", "train.py"});
    CHECK(f.Rank(spec).GetOr("GCULAUNCH_SHIM_PATCH_CUDA", "") == "0");
  }
  SECTION("without --python-shim nothing of it, even when inherited") {
    f.env.Set("GCULAUNCH_SHIM_PARENT", "1");
    f.env.Set("GCULAUNCH_SHIM_DIR", "/old");
    f.env.Set("PYTHONPATH", "/opt/project");
    const EnvMap rank = f.Rank(f.Spec({"--device", "cpu", "train.py"}));
    for (const std::string& var : PythonShimVariables()) CHECK_FALSE(rank.Has(var));
    CHECK(rank.GetOr("PYTHONPATH", "") == "/opt/project");
  }
}

TEST_CASE("python shim: the dry run shows the PYTHONPATH change and notes the shim",
          "[python_shim]") {
  Fixture f;
  const LaunchSpec spec = f.Spec(
      {"--device", "cpu", "--nproc-per-node", "2", "--python-shim", "--dry-run", "train.py"});
  const std::string text = RenderDryRun(spec, f.env);
  CHECK(text.find("    PYTHONPATH='<temporary directory created at launch>/python-shim'\n") !=
        std::string::npos);
  CHECK(text.find("    GCULAUNCH_SHIM_PARENT='<gculaunch pid>'\n") != std::string::npos);
  CHECK(text.find("  - --python-shim: each rank loads gculaunch's sitecustomize (first on "
                  "PYTHONPATH), which calls init_process_group('gloo'), makes "
                  "torch.cuda.set_device/current_device/device_count harmless and falls back "
                  "to gloo if 'gloo' is missing; it acts only in the ranks themselves\n") !=
        std::string::npos);
  const LaunchSpec gcu = f.Spec({"--device", "gcu", "--nproc-per-node", "8", "--python-shim",
                                 "--no-backend-fallback", "--dry-run", "train.py"});
  CHECK(std::find(gcu.notes.begin(), gcu.notes.end(),
                  "--python-shim: each rank loads gculaunch's sitecustomize (first on "
                  "PYTHONPATH), which calls init_process_group('eccl'), sends "
                  "torch.cuda.set_device/current_device/device_count to torch_gcu; a missing "
                  "'eccl' stops the rank (--no-backend-fallback)") != gcu.notes.end());
}

TEST_CASE("python shim: flag errors", "[python_shim]") {
  Fixture f;
  auto error = [&](const std::vector<std::string>& args) {
    auto spec = f.TrySpec(args);
    REQUIRE_FALSE(spec.ok());
    return spec.error().Format();
  };
  CHECK(error({"--device", "cpu", "--no-backend-fallback", "train.py"}) ==
        "gculaunch: --no-backend-fallback only applies with --python-shim (fix: add "
        "--python-shim, or drop --no-backend-fallback)");
  CHECK(
      error({"--device", "cpu", "--python-shim", "--env", "GCULAUNCH_SHIM_PARENT=1", "train.py"}) ==
      "gculaunch: --env GCULAUNCH_SHIM_PARENT=1: GCULAUNCH_SHIM_PARENT is set by gculaunch "
      "for each rank (fix: it belongs to --python-shim (and --no-backend-fallback))");
  f.env.Set("PET_PYTHON_SHIM", "1");
  CHECK(f.Spec({"--device", "cpu", "train.py"}).python_shim);
}

}  // namespace
}  // namespace gculaunch
