#include "launcher/sys/torch_probe.h"

#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "base/text.h"
#include "launcher/frontend/dry_run.h"
#include "launcher/frontend/rank_env.h"
#include "launcher/sys/command_runner.h"

namespace gculaunch::sys {
namespace {

// The variables that change what the interpreter's search path holds, and which interpreter
// a shim picks (PATH: which shim, and pyenv's "system").
constexpr const char* kPathVariables[] = {
    "PYTHONPATH",     "PYTHONHOME",       "PYTHONUSERBASE", "PYTHONNOUSERSITE",
    "PYTHONSAFEPATH", "PYTHONPLATLIBDIR", "HOME",           "PATH"};

constexpr int kProbeNice = 19;  // the probe yields to the ranks it runs beside

std::string RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) return "";
  return resolved;
}

std::string CurrentDir() {
  std::error_code ec;
  const std::filesystem::path cwd = std::filesystem::current_path(ec);
  return ec ? "" : cwd.string();
}

// "torch 2.6.0" / "no torch" / "nothing": what an answer says, for messages.
std::string TorchWords(const RanksTorch& torch) {
  switch (torch.state) {
    case RanksTorch::State::kFound:
      return "torch " + torch.version;
    case RanksTorch::State::kAbsent:
      return "no torch";
    case RanksTorch::State::kUnknown:
    case RanksTorch::State::kNotProbed:
      break;
  }
  return "no answer";
}

}  // namespace

std::string TorchCacheKey(const std::vector<std::string>& probe_argv, const EnvMap& probe_env,
                          const std::string& cwd) {
  std::string key;
  auto add = [&key](std::string_view name, std::string_view value) {
    key += std::string(name) + "=" + CacheHex(value) + "\n";
  };
  // The probe program itself: a changed program asks a changed question.
  add("probe", CacheHash(kTorchProbeSource));
  const std::string python = probe_argv.empty() ? "" : probe_argv[0];
  add("python", python);
  add("python_real", RealPath(python));
  add("python_identity", FileSignature(python));
  // sys.path[0]: the script's real directory (any script there shares the answer), or the
  // working directory; the working directory also anchors relative PYTHONPATH entries and
  // a shim's search for its version file.
  const std::string mode = probe_argv.size() > 3 ? probe_argv[3] : "";
  const std::string where = probe_argv.size() > 4 ? probe_argv[4] : "";
  add("mode", mode);
  if (mode == "script") {
    const std::string real = RealPath(where);
    add("path0", real.empty() ? where : std::filesystem::path(real).parent_path().string());
  }
  add("cwd", cwd);
  auto add_var = [&](const char* var) {
    const auto value = probe_env.Get(var);
    add(var, value ? "=" + *value : "unset");
  };
  for (const char* var : kPathVariables) add_var(var);
  for (const char* var : kShimVariables) add_var(var);
  return key;
}

EnvMap TorchProbeEnv(const LaunchSpec& spec, const EnvMap& env) {
  LaunchSpec plain = spec;
  plain.python_shim = false;
  plain.stack_dumps = false;
  plain.hang_timeout_s = 0;
  plain.interpreter_env.clear();  // the shim sets them itself
  return BuildRankEnv(plain, env, 0, 0, DryRunRuntime(plain));
}

TorchProbeOptions TorchProbeOptionsFor(const EnvMap& env) {
  TorchProbeOptions options;
  options.cache = true;
  options.cache_env = EnvMap{};
  for (const char* var : {"XDG_CACHE_HOME", "HOME"}) {
    if (auto value = env.Get(var)) options.cache_env.Set(var, *value);
  }
  options.uid = ::geteuid();
  options.nice = kProbeNice;
  return options;
}

TorchProbe TorchProbe::Start(const LaunchSpec& spec, const EnvMap& env, TorchProbeOptions options) {
  TorchProbe probe;
  probe.options_ = std::move(options);
  const std::vector<std::string> argv = TorchProbeArgv(spec);
  if (argv.empty()) {
    probe.quick_.torch.how = "--no-python";
    return probe;
  }
  probe.python_ = argv[0];
  const EnvMap probe_env = TorchProbeEnv(spec, env);
  if (probe.options_.cwd.empty()) probe.options_.cwd = CurrentDir();
  const std::string& cwd = probe.options_.cwd;
  // Only python3 found on PATH is looked behind; --python and PYTHON_EXEC run as given.
  if (spec.python_origin == kPythonOnPath) probe.shim_ = ReadShim(probe.python_);
  if (probe.shim_) {
    for (const std::string& file : ShimSelectionFiles(*probe.shim_, probe_env, cwd)) {
      probe.selection_checks_.emplace_back(file, FileSignature(file));
    }
  }
  probe.key_ = TorchCacheKey(argv, probe_env, cwd);
  if (probe.options_.cache) {
    if (auto dir = TorchCacheDir::Open(probe.options_.cache_env, probe.options_.uid, false);
        dir.ok()) {
      probe.cache_dir_ = std::move(*dir);
      if (auto hit = probe.cache_dir_->Read(probe.key_)) {
        probe.quick_ = probe.FromEntry(*hit);
        return probe;
      }
    }
  }
  probe.QuickFromFiles(argv[3], argv[4], probe_env);
  probe.argv_ = argv;
  probe.env_ = probe_env;
  probe.due_ = true;
  return probe;
}

void TorchProbe::Begin() {
  if (!due_) return;
  due_ = false;
  running_ = RunningCommand::Start(argv_, env_, options_.timeout_s, options_.nice);
}

TorchProbe::TorchProbe(TorchProbe&&) noexcept = default;
TorchProbe& TorchProbe::operator=(TorchProbe&&) noexcept = default;
TorchProbe::~TorchProbe() = default;

// The shim's choice when the interpreter that answered is another file than the shim.
ShimChoice TorchProbe::ChoiceOf(const std::string& executable, const std::string& pyenv_version,
                                const std::string& how) const {
  ShimChoice choice;
  if (!shim_) return choice;
  choice.shim = python_;
  choice.kind = shim_->kind;
  const std::string real = RealPath(executable);
  if (executable.empty() || executable.front() != '/' || real.empty() ||
      real == RealPath(python_)) {
    choice.how = "it did not name another interpreter";
    return choice;
  }
  choice.interpreter = executable;
  if (shim_->kind == "pyenv") choice.pyenv_version = pyenv_version;
  choice.how = shim_->kind + ", " + how;
  return choice;
}

RanksPython TorchProbe::FromEntry(const TorchCacheEntry& entry) const {
  RanksPython answer;
  answer.torch.state = entry.found ? RanksTorch::State::kFound : RanksTorch::State::kAbsent;
  answer.torch.version = entry.version;
  answer.torch.how = "from the cache; found by running " + python_ + " earlier";
  answer.shim = ChoiceOf(entry.executable, entry.pyenv_version,
                         "from the cache; found by running the shim earlier");
  return answer;
}

void TorchProbe::QuickFromFiles(const std::string& mode, const std::string& where,
                                const EnvMap& probe_env) {
  std::string interpreter = python_;
  if (shim_) {
    quick_.shim.shim = python_;
    quick_.shim.kind = shim_->kind;
    quick_.shim.how = "asdf's choice is learnt by running the shim";
    std::string why;
    if (shim_->kind == "pyenv") {
      if (auto choice = ReadPyenvChoice(python_, *shim_, probe_env, options_.cwd, &why)) {
        quick_.shim = std::move(*choice);
        interpreter = quick_.shim.interpreter;
      } else {
        quick_.shim.how = "pyenv's files do not settle it: " + why;
      }
    }
  }
  quick_.torch = ReadRanksTorch(interpreter, mode, where, probe_env, options_.cwd);
}

RanksPython TorchProbe::Finish() {
  Begin();
  if (!running_) return quick_;
  const CommandOutcome outcome = running_->Finish();
  running_.reset();
  return Conclude(outcome);
}

std::optional<RanksPython> TorchProbe::FinishIfDone() {
  due_ = false;
  if (!running_) return std::nullopt;
  if (!running_->Exited()) {
    running_.reset();  // its group is killed and it is reaped: nothing is cached this time
    return std::nullopt;
  }
  return Finish();
}

// The probe's outcome: its answer, cached when it can be checked later; what a launch would
// use now.
RanksPython TorchProbe::Conclude(const CommandOutcome& outcome) {
  RanksPython answer = quick_;
  const std::string& py = python_;
  std::ostringstream bound;
  bound << options_.timeout_s;
  std::string failed;
  switch (outcome.kind) {
    case CommandOutcome::Kind::kSpawnFailed:
      failed = "cannot run " + py + ": " + outcome.error;
      break;
    case CommandOutcome::Kind::kTimedOut:
      failed = py + " did not answer within " + bound.str() + " s";
      break;
    case CommandOutcome::Kind::kSignaled:
      failed = py + " was killed by signal " + std::to_string(outcome.code);
      break;
    case CommandOutcome::Kind::kExited:
      break;
  }
  const std::optional<TorchProbeReport> report =
      failed.empty() ? ParseTorchProbeOutput(outcome.out) : std::nullopt;
  if (failed.empty() && (outcome.code != 0 || !report)) {
    failed = py + " exited with code " + std::to_string(outcome.code) +
             " without the answer (run it by hand: python -c 'import torch')";
  }
  if (!failed.empty()) {
    answer.torch.how += "; " + failed;
    return answer;
  }
  TorchCacheEntry entry;
  entry.key = key_;
  entry.checks = report->checks;
  entry.executable = report->executable;
  entry.pyenv_version = report->pyenv_version;
  if (!report->version_file.empty()) {
    std::optional<std::string> version;
    if (report->version_text) version = ParseTorchVersionFile(*report->version_text);
    if (!version) {
      answer.torch.how += "; running " + py + " found no __version__ in " + report->version_file;
      return answer;
    }
    entry.found = true;
    entry.version = *version;
    entry.version_file = report->version_file;
  }
  Cache(std::move(entry), answer);
  return answer;
}

// Caches the probe's `entry` and makes `answer` the probe's own; when it cannot be cached,
// `answer` stays Quick's and says why.
void TorchProbe::Cache(TorchCacheEntry entry, RanksPython& answer) {
  RanksTorch found;
  found.state = entry.found ? RanksTorch::State::kFound : RanksTorch::State::kAbsent;
  found.version = entry.version;
  auto not_kept = [&](const std::string& why) {
    answer.torch.how +=
        "; running " + python_ + " found " + TorchWords(found) + ", not cached: " + why;
  };
  // An interpreter that runs Python in another root (a container, a chroot) reports files
  // that gculaunch does not see as it does: an entry for it could never be used.
  for (const auto& [path, signature] : entry.checks) {
    if (FileSignature(path) != signature)
      return not_kept("it does not see " + path + " as gculaunch does");
  }
  const ShimChoice choice =
      ChoiceOf(entry.executable, entry.pyenv_version, "found by running the shim once");
  if (!choice.interpreter.empty()) {
    entry.checks.insert(entry.checks.end(), selection_checks_.begin(), selection_checks_.end());
    entry.checks.emplace_back(choice.interpreter, FileSignature(choice.interpreter));
  }
  if (!options_.cache) return not_kept("no cache");
  if (!cache_dir_) {
    auto dir = TorchCacheDir::Open(options_.cache_env, options_.uid, true);
    if (!dir.ok()) return not_kept(dir.error().what);
    cache_dir_ = std::move(*dir);
  }
  if (Status written = cache_dir_->Write(entry); !written.ok()) {
    return not_kept(written.error().what);
  }
  answer.torch = found;
  answer.torch.how = "found by running " + python_ + " once; cached";
  answer.shim = choice;
}

}  // namespace gculaunch::sys
