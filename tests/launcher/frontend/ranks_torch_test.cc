#include "launcher/frontend/ranks_torch.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "launcher/frontend/launch_spec.h"
#include "launcher/frontend/rank_env.h"

namespace gculaunch {
namespace {

RanksTorch Found(const std::string& version) {
  return RanksTorch{RanksTorch::State::kFound, version, "found by running /usr/bin/python3 once"};
}

using Vars = std::vector<std::string>;

LaunchSpec PythonSpec() {
  LaunchSpec spec;
  spec.profile = *FindBuiltinProfile("cpu");
  spec.python = "/usr/bin/python3";
  spec.executable = "/usr/bin/python3";
  spec.argv = {"/usr/bin/python3", "-u", "train.py", "--lr", "0.1"};
  return spec;
}

}  // namespace

TEST_CASE("ranks torch: __version__ is read from version.py as text", "[ranks_torch]") {
  // torch 1.13's generated file.
  CHECK(ParseTorchVersionFile("__version__ = '1.13.1+cu117'\ndebug = False\n"
                              "cuda: Optional[str] = '11.7'\n") == "1.13.1+cu117");
  // 2.x: the same line among others, an annotation, double quotes.
  CHECK(ParseTorchVersionFile("from typing import Optional\n__all__ = ['__version__']\n"
                              "__version__ = '2.6.0+cu124'\n") == "2.6.0+cu124");
  CHECK(ParseTorchVersionFile("__version__: str = \"2.2.0\"\n") == "2.2.0");
  CHECK(ParseTorchVersionFile("  __version__='2.1.2'") == "2.1.2");
  // Nothing that only looks like it.
  CHECK_FALSE(ParseTorchVersionFile("").has_value());
  CHECK_FALSE(ParseTorchVersionFile("__version__ = get_version()\n").has_value());
  CHECK_FALSE(ParseTorchVersionFile("__version__ = ''\n").has_value());
  CHECK_FALSE(ParseTorchVersionFile("__version__ = '2.6.0\n").has_value());
  CHECK_FALSE(ParseTorchVersionFile("__all__ = ['__version__']\n").has_value());
  CHECK_FALSE(ParseTorchVersionFile("__version__x = '2.6.0'\n").has_value());
}

TEST_CASE("ranks torch: major and minor of a version", "[ranks_torch]") {
  CHECK(TorchMajorMinor("1.13.1+cu117") == std::make_pair(1, 13));
  CHECK(TorchMajorMinor("2.2.0a0+git1234") == std::make_pair(2, 2));
  CHECK(TorchMajorMinor("2.10") == std::make_pair(2, 10));
  CHECK_FALSE(TorchMajorMinor("2").has_value());
  CHECK_FALSE(TorchMajorMinor("v2.6").has_value());
  CHECK_FALSE(TorchMajorMinor("2.x").has_value());
  CHECK_FALSE(TorchMajorMinor("").has_value());
}

TEST_CASE("ranks torch: the variable that torch's torchrun sets", "[ranks_torch]") {
  const Vars old_name = {"NCCL_ASYNC_ERROR_HANDLING"};
  const Vars new_name = {"TORCH_NCCL_ASYNC_ERROR_HANDLING"};
  const Vars both = {"NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING"};
  CHECK(NcclErrorHandlingVariables(Found("1.13.1")) == old_name);
  CHECK(NcclErrorHandlingVariables(Found("2.1.2+cu121")) == old_name);
  CHECK(NcclErrorHandlingVariables(Found("2.2.0")) == new_name);
  CHECK(NcclErrorHandlingVariables(Found("2.2.0a0+git")) == new_name);
  CHECK(NcclErrorHandlingVariables(Found("2.6.0+cu124")) == new_name);
  CHECK(NcclErrorHandlingVariables(Found("3.0")) == new_name);
  CHECK(NcclErrorHandlingVariables(Found("nightly")) == both);
  CHECK(NcclErrorHandlingVariables(RanksTorch{}) == both);
  CHECK(NcclErrorHandlingVariables(RanksTorch{RanksTorch::State::kUnknown, "", "timeout"}) == both);
  CHECK(NcclErrorHandlingVariables(RanksTorch{RanksTorch::State::kAbsent, "", ""}) == both);
}

TEST_CASE("ranks torch: the dry run's line", "[ranks_torch]") {
  CHECK(DescribeRanksTorch(Found("1.13.1")) ==
        "torch 1.13.1 (found by running /usr/bin/python3 once) -> NCCL_ASYNC_ERROR_HANDLING");
  CHECK(DescribeRanksTorch(RanksTorch{RanksTorch::State::kNotProbed, "", "--no-python"}) ==
        "torch version not looked for (--no-python) -> NCCL_ASYNC_ERROR_HANDLING and "
        "TORCH_NCCL_ASYNC_ERROR_HANDLING");
  CHECK(DescribeRanksTorch(RanksTorch{RanksTorch::State::kUnknown, "", "python did not answer"}) ==
        "torch version unknown (python did not answer) -> NCCL_ASYNC_ERROR_HANDLING and "
        "TORCH_NCCL_ASYNC_ERROR_HANDLING");
  CHECK(DescribeRanksTorch(RanksTorch{RanksTorch::State::kAbsent, "", ""}) ==
        "no torch -> NCCL_ASYNC_ERROR_HANDLING and TORCH_NCCL_ASYNC_ERROR_HANDLING");
}

TEST_CASE("ranks torch: the probe's output", "[ranks_torch]") {
  const auto report = ParseTorchProbeOutput(
      "a sitecustomize said hello\n"
      "gculaunch-torch-probe: {\"version_file\": \"/v/lib/torch/version.py\", "
      "\"version_text\": \"__version__ = '2.6.0'\\n\", "
      "\"checks\": [[\"/v/lib/torch/version.py\", \"1:2:3:4:5\"], [\"/work\", \"absent\"]]}\n");
  REQUIRE(report.has_value());
  CHECK(report->version_file == "/v/lib/torch/version.py");
  CHECK(report->version_text == "__version__ = '2.6.0'\n");
  using Checks = std::vector<std::pair<std::string, std::string>>;
  CHECK(report->checks == Checks{{"/v/lib/torch/version.py", "1:2:3:4:5"}, {"/work", "absent"}});

  const auto none = ParseTorchProbeOutput(
      "gculaunch-torch-probe: {\"version_file\": null, \"version_text\": null, "
      "\"checks\": [[\"/a\", \"absent\"]]}\n");
  REQUIRE(none.has_value());
  CHECK(none->version_file.empty());
  CHECK_FALSE(none->version_text.has_value());

  CHECK(none->executable.empty());

  // The interpreter itself, behind a shim, and pyenv's choice as it saw them.
  const auto shimmed = ParseTorchProbeOutput(
      "gculaunch-torch-probe: {\"version_file\": null, \"version_text\": null, \"checks\": [], "
      "\"executable\": \"/p/versions/3.11.7/bin/python3\", \"pyenv_version\": \"3.11.7\"}\n");
  REQUIRE(shimmed.has_value());
  CHECK(shimmed->executable == "/p/versions/3.11.7/bin/python3");
  CHECK(shimmed->pyenv_version == "3.11.7");

  CHECK_FALSE(ParseTorchProbeOutput("").has_value());
  CHECK_FALSE(ParseTorchProbeOutput("gculaunch-torch-probe: {not json}\n").has_value());
  CHECK_FALSE(ParseTorchProbeOutput("gculaunch-torch-probe: {\"checks\": []}\n").has_value());
  CHECK_FALSE(ParseTorchProbeOutput("gculaunch-torch-probe: {\"version_file\": null, "
                                    "\"checks\": [[\"/a\"]]}\n")
                  .has_value());
  CHECK_FALSE(ParseTorchProbeOutput("x gculaunch-torch-probe: {\"version_file\": null, "
                                    "\"checks\": []}\n")
                  .has_value());
}

TEST_CASE("ranks torch: the probe runs the ranks' interpreter beside their script",
          "[ranks_torch]") {
  LaunchSpec spec = PythonSpec();
  CHECK(TorchProbeArgv(spec) ==
        Vars{"/usr/bin/python3", "-c", kTorchProbeSource, "script", "train.py"});
  spec.argv = {"/usr/bin/python3", "-u", "-m", "pkg.train"};
  CHECK(TorchProbeArgv(spec) == Vars{"/usr/bin/python3", "-c", kTorchProbeSource, "cwd", ""});
  spec.argv = {"/opt/venv/bin/python", "-u", "run${local_rank}/t.py"};
  spec.python = "/opt/venv/bin/python";
  CHECK(TorchProbeArgv(spec) ==
        Vars{"/opt/venv/bin/python", "-c", kTorchProbeSource, "script", "run0/t.py"});
  // The ranks run a shim's interpreter: the probe asks the shim again.
  spec.interpreter_shim = "/p/shims/python";
  CHECK(TorchProbeArgv(spec)[0] == "/p/shims/python");
  spec.python.clear();  // --no-python
  spec.argv = {"./train.sh"};
  CHECK(TorchProbeArgv(spec).empty());
}

TEST_CASE("ranks torch: the rank gets the name its torch's torchrun sets", "[ranks_torch]") {
  LaunchSpec spec = PythonSpec();
  const RankRuntime runtime{"29500", "r", "/s"};
  const EnvMap base{{"PATH", "/usr/bin"}};

  spec.ranks_torch = Found("1.13.1");
  EnvMap env = BuildRankEnv(spec, base, 0, 0, runtime);
  CHECK(env.Get("NCCL_ASYNC_ERROR_HANDLING") == "1");
  CHECK_FALSE(env.Has("TORCH_NCCL_ASYNC_ERROR_HANDLING"));

  spec.ranks_torch = Found("2.6.0");
  env = BuildRankEnv(spec, base, 0, 0, runtime);
  CHECK_FALSE(env.Has("NCCL_ASYNC_ERROR_HANDLING"));
  CHECK(env.Get("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "1");

  // A user's value of either name is kept, as torchrun keeps it; the chosen name is still
  // added when missing (torchrun 2.6 does so too).
  env = BuildRankEnv(spec, EnvMap{{"NCCL_ASYNC_ERROR_HANDLING", "0"}}, 0, 0, runtime);
  CHECK(env.Get("NCCL_ASYNC_ERROR_HANDLING") == "0");
  CHECK(env.Get("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "1");
  env = BuildRankEnv(spec, EnvMap{{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "0"}}, 0, 0, runtime);
  CHECK(env.Get("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "0");
  CHECK_FALSE(env.Has("NCCL_ASYNC_ERROR_HANDLING"));
  spec.extra_env = {{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"}};
  env = BuildRankEnv(spec, base, 0, 0, runtime);
  CHECK(env.Get("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "3");
  spec.extra_env.clear();

  // The contract (what the dry run lists) holds only the chosen name.
  const Vars contract = RankContractVariables(spec);
  CHECK(std::count(contract.begin(), contract.end(), "TORCH_NCCL_ASYNC_ERROR_HANDLING") == 1);
  CHECK(std::count(contract.begin(), contract.end(), "NCCL_ASYNC_ERROR_HANDLING") == 0);

  // Unknown (and --no-python): both, as before.
  spec.ranks_torch = RanksTorch{};
  env = BuildRankEnv(spec, base, 0, 0, runtime);
  CHECK(env.Get("NCCL_ASYNC_ERROR_HANDLING") == "1");
  CHECK(env.Get("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "1");
}

}  // namespace gculaunch
