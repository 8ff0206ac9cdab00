#include "launcher/frontend/ranks_python.h"

#include <algorithm>

#include "base/text.h"
#include "launcher/frontend/launch_spec.h"

namespace gculaunch {
namespace {

// The ranks' PATH: the last --env PATH, else gculaunch's own; empty when neither has one.
std::string RanksPath(const LaunchSpec& spec, const EnvMap& env) {
  for (auto it = spec.extra_env.rbegin(); it != spec.extra_env.rend(); ++it) {
    if (it->first == "PATH") return it->second;
  }
  return env.GetOr("PATH", "");
}

std::string Directory(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// What `pyenv exec` (and, for PATH, `asdf exec`) exports to the program it runs: the
// program's directory first on PATH (pyenv: not for its "system" version, which it leaves
// to PATH), and PYENV_VERSION.
std::vector<std::pair<std::string, std::string>> ShimEnv(const ShimChoice& choice,
                                                         const std::string& path) {
  std::vector<std::pair<std::string, std::string>> vars;
  const bool system = choice.kind == "pyenv" && choice.pyenv_version == "system";
  if (!system) {
    const std::string dir = Directory(choice.interpreter);
    const std::vector<std::string> entries = Split(path, ':');
    if (entries.empty() || entries.front() != dir) {
      vars.emplace_back("PATH", path.empty() ? dir : dir + ":" + path);
    }
  }
  if (!choice.pyenv_version.empty()) vars.emplace_back("PYENV_VERSION", choice.pyenv_version);
  return vars;
}

}  // namespace

void UseRanksPython(LaunchSpec& spec, const EnvMap& env, const RanksPython& python) {
  spec.ranks_torch = python.torch;
  const ShimChoice& choice = python.shim;
  if (choice.shim.empty() || spec.python.empty()) return;
  if (choice.interpreter.empty()) {
    spec.notes.push_back(
        spec.python + " is a " + choice.kind +
        " shim; the ranks run it as it is (its interpreter is not known yet: " + choice.how + ")");
    return;
  }
  spec.interpreter_shim = spec.python;
  spec.interpreter_shim_how = choice.how;
  spec.interpreter_env = ShimEnv(choice, RanksPath(spec, env));
  spec.python = choice.interpreter;
  spec.executable = choice.interpreter;
  if (!spec.argv.empty()) spec.argv[0] = choice.interpreter;
  std::vector<std::string> exported;
  for (const auto& [key, value] : spec.interpreter_env) exported.push_back(key);
  spec.notes.push_back(DescribeInterpreter(spec) +
                       "; the ranks run it directly, as torchrun's "
                       "ranks run sys.executable" +
                       (exported.empty()
                            ? std::string()
                            : ", with " + JoinAnd(exported) + " as the shim sets them"));
}

std::string DescribeInterpreter(const LaunchSpec& spec) {
  if (spec.interpreter_shim.empty()) return "";
  return "interpreter " + spec.python + ", which the shim " + spec.interpreter_shim + " runs (" +
         spec.interpreter_shim_how + ")";
}

}  // namespace gculaunch
