#include "launcher/spec/python_shim.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace gculaunch {

std::string PythonShimDir(const RankRuntime& runtime) {
  return runtime.error_file_root + "/python-shim";
}

Status WriteSiteDir(const std::string& flag, const std::string& dir,
                    const std::vector<std::pair<std::string_view, std::string_view>>& files) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return Error{flag + ": cannot create '" + dir + "': " + ec.message(),
                 "check the permissions of --log-dir (or of the temporary directory)"};
  }
  for (const auto& [name, text] : files) {
    const std::string path = dir + "/" + std::string(name);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();
    if (!out) {
      return Error{flag + ": cannot write '" + path + "': " + std::strerror(errno),
                   "check the permissions and free space of --log-dir (or of the temporary "
                   "directory)"};
    }
    std::filesystem::permissions(
        path,
        std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
            std::filesystem::perms::group_read | std::filesystem::perms::others_read,
        ec);
  }
  return OkStatus();
}

Status WritePythonShim(const std::string& dir) {
  return WriteSiteDir("--python-shim", dir, PythonShimFiles());
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
