#include "launcher/frontend/python_shim.h"

#include "launcher/frontend/launch_spec.h"

namespace gculaunch {

std::string PythonShimDir(const RankRuntime& runtime) {
  return runtime.rank_file_root + "/python-shim";
}

void PrependPythonPath(const std::string& dir, EnvMap& env) {
  const std::string python_path = env.GetOr("PYTHONPATH", "");
  env.Set("PYTHONPATH", python_path.empty() ? dir : dir + ":" + python_path);
}

const std::vector<std::string>& PythonShimVariables() {
  static const std::vector<std::string> vars = {
      "GCULAUNCH_SHIM_PARENT", "GCULAUNCH_SHIM_DIR",        "GCULAUNCH_SHIM_FALLBACK",
      "GCULAUNCH_SHIM_MODULE", "GCULAUNCH_SHIM_PATCH_CUDA", "GCULAUNCH_SHIM_VISIBLE_ENV"};
  return vars;
}

void AddPythonShimEnv(const LaunchSpec& spec, const RankRuntime& runtime, EnvMap& env) {
  const std::string dir = PythonShimDir(runtime);
  PrependPythonPath(dir, env);
  env.Set("GCULAUNCH_SHIM_PARENT", runtime.launcher_pid);
  env.Set("GCULAUNCH_SHIM_DIR", dir);
  env.Set("GCULAUNCH_SHIM_FALLBACK", spec.backend_fallback ? "1" : "0");
  env.Set("GCULAUNCH_SHIM_MODULE", spec.profile.python_module);
  env.Set("GCULAUNCH_SHIM_PATCH_CUDA", spec.profile.backend == "nccl" ? "0" : "1");
  env.Set("GCULAUNCH_SHIM_VISIBLE_ENV",
          spec.profile.visible_env.empty() ? "" : spec.profile.visible_env.front());
}

}  // namespace gculaunch
