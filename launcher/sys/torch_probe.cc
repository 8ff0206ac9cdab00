#include "launcher/sys/torch_probe.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "base/text.h"
#include "launcher/frontend/dry_run.h"
#include "launcher/frontend/rank_env.h"
#include "launcher/sys/command_runner.h"
#include "launcher/sys/held_dir.h"
#include "launcher/sys/safe_files.h"
#include "launcher/sys/unique_fd.h"

namespace gculaunch::sys {
namespace {

constexpr std::string_view kHeader = "gculaunch torch cache 1";
constexpr size_t kMaxEntryBytes = 1 << 16;
constexpr size_t kMaxCacheFiles = 256;  // the most recently written are kept

// The variables that change what the interpreter's search path holds (PYENV_VERSION: which
// Python a pyenv shim runs).
constexpr const char* kPathVariables[] = {
    "PYTHONPATH",     "PYTHONHOME",       "PYTHONUSERBASE", "PYTHONNOUSERSITE",
    "PYTHONSAFEPATH", "PYTHONPLATLIBDIR", "HOME",           "PYENV_VERSION"};

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

std::optional<std::string> Unhex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]);
    const int lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

// FNV-1a, 64 bits: a stable name for a key (std::hash may differ between builds).
std::string KeyHash(std::string_view key) {
  std::uint64_t h = 1469598103934665603ULL;
  for (char c : key) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return text;
}

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

}  // namespace

std::string FileSignature(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return errno == ENOENT || errno == ENOTDIR ? "absent" : "error";
  std::ostringstream out;
  out << st.st_dev << ':' << st.st_ino << ':' << st.st_size << ':'
      << static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec << ':'
      << static_cast<long long>(st.st_ctim.tv_sec) * 1000000000LL + st.st_ctim.tv_nsec;
  return out.str();
}

std::string FormatTorchCacheEntry(const TorchCacheEntry& entry) {
  std::string out = std::string(kHeader) + "\n";
  out += "key " + Hex(entry.key) + "\n";
  out += "found " + std::string(entry.found ? "1" : "0") + "\n";
  if (entry.found) {
    out += "version " + Hex(entry.version) + "\n";
    out += "version_file " + Hex(entry.version_file) + "\n";
  }
  for (const auto& [path, signature] : entry.checks) {
    out += "check " + Hex(path) + " " + Hex(signature) + "\n";
  }
  return out;
}

std::optional<TorchCacheEntry> ParseTorchCacheEntry(std::string_view text) {
  const std::vector<std::string> lines = Split(text, '\n');
  if (lines.empty() || lines[0] != kHeader) return std::nullopt;
  TorchCacheEntry entry;
  bool has_key = false;
  bool has_found = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;  // after the last newline
    const std::vector<std::string> words = Split(lines[i], ' ');
    if (words.size() == 2 && words[0] == "found" && (words[1] == "0" || words[1] == "1")) {
      entry.found = words[1] == "1";
      has_found = true;
      continue;
    }
    if (words.size() == 3 && words[0] == "check") {
      auto path = Unhex(words[1]);
      auto signature = Unhex(words[2]);
      if (!path || !signature) return std::nullopt;
      entry.checks.emplace_back(std::move(*path), std::move(*signature));
      continue;
    }
    if (words.size() != 2) return std::nullopt;
    auto value = Unhex(words[1]);
    if (!value) return std::nullopt;
    if (words[0] == "key") {
      entry.key = std::move(*value);
      has_key = true;
    } else if (words[0] == "version") {
      entry.version = std::move(*value);
    } else if (words[0] == "version_file") {
      entry.version_file = std::move(*value);
    } else {
      return std::nullopt;
    }
  }
  if (!has_key || !has_found) return std::nullopt;
  if (entry.found && (entry.version.empty() || entry.version_file.empty())) return std::nullopt;
  return entry;
}

std::string TorchCacheKey(const std::vector<std::string>& probe_argv, const EnvMap& probe_env,
                          const std::string& cwd) {
  std::string key;
  auto add = [&key](std::string_view name, std::string_view value) {
    key += std::string(name) + "=" + Hex(value) + "\n";
  };
  // The probe program itself: a changed program asks a changed question.
  add("probe", KeyHash(kTorchProbeSource));
  const std::string python = probe_argv.empty() ? "" : probe_argv[0];
  add("python", python);
  add("python_real", RealPath(python));
  add("python_identity", FileSignature(python));
  // sys.path[0]: the script's real directory (any script there shares the answer), or the
  // working directory; the working directory also anchors relative PYTHONPATH entries.
  const std::string mode = probe_argv.size() > 3 ? probe_argv[3] : "";
  const std::string where = probe_argv.size() > 4 ? probe_argv[4] : "";
  add("mode", mode);
  if (mode == "script") {
    const std::string real = RealPath(where);
    add("path0", real.empty() ? where : std::filesystem::path(real).parent_path().string());
  }
  add("cwd", cwd);
  for (const char* var : kPathVariables) {
    const auto value = probe_env.Get(var);
    add(var, value ? "=" + *value : "unset");
  }
  return key;
}

std::optional<std::string> TorchCacheDir(const EnvMap& env, uid_t uid, std::string* why) {
  std::string dir;
  const std::string xdg = env.GetOr("XDG_CACHE_HOME", "");
  const std::string home = env.GetOr("HOME", "");
  if (!xdg.empty() && xdg.front() == '/') {
    dir = xdg + "/gculaunch/torch-versions";
  } else if (!home.empty() && home.front() == '/') {
    dir = home + "/.cache/gculaunch/torch-versions";
  } else {
    if (why != nullptr) *why = "neither XDG_CACHE_HOME nor HOME is an absolute path";
    return std::nullopt;
  }
  if (auto foreign = FindForeignWriter(dir, uid)) {
    if (why != nullptr) *why = *foreign;
    return std::nullopt;
  }
  return dir;
}

std::string TorchCacheFile(const std::string& dir, const std::string& key) {
  return dir + "/" + KeyHash(key);
}

std::optional<TorchCacheEntry> ReadTorchCacheFile(const std::string& path, const std::string& key,
                                                  uid_t uid) {
  const int raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (raw < 0) return std::nullopt;
  UniqueFd fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != uid ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 || st.st_size > static_cast<off_t>(kMaxEntryBytes)) {
    return std::nullopt;
  }
  std::string text;
  char buffer[8192];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > kMaxEntryBytes) return std::nullopt;
  }
  std::optional<TorchCacheEntry> entry = ParseTorchCacheEntry(text);
  if (!entry || entry->key != key) return std::nullopt;
  for (const auto& [checked, signature] : entry->checks) {
    if (FileSignature(checked) != signature) return std::nullopt;
  }
  return entry;
}

Status WriteTorchCacheFile(const std::string& dir, const TorchCacheEntry& entry) {
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(dir).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Error{"cannot create " + dir + ": " + std::strerror(errno),
                 "check the permissions of its parent"};
  }
  Status written = ReplaceFile(TorchCacheFile(dir, entry.key), FormatTorchCacheEntry(entry), 0600);
  if (written.ok()) PruneTorchCache(dir, kMaxCacheFiles);
  return written;
}

void PruneTorchCache(const std::string& dir, size_t keep) {
  std::vector<std::pair<std::filesystem::file_time_type, std::filesystem::path>> files;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() != 16 || name.find_first_not_of("0123456789abcdef") != std::string::npos) {
      continue;  // not an entry (a temporary file of ReplaceFile, something else)
    }
    std::error_code time_ec;
    const auto time = it->last_write_time(time_ec);
    if (!time_ec) files.emplace_back(time, it->path());
  }
  if (files.size() <= keep) return;
  std::sort(files.begin(), files.end());
  for (size_t i = 0; i + keep < files.size(); ++i) std::filesystem::remove(files[i].second, ec);
}

EnvMap TorchProbeEnv(const LaunchSpec& spec, const EnvMap& env) {
  LaunchSpec plain = spec;
  plain.python_shim = false;
  plain.stack_dumps = false;
  plain.hang_timeout_s = 0;
  return BuildRankEnv(plain, env, 0, 0, DryRunRuntime(plain));
}

TorchProbeOptions TorchProbeOptionsFor(const EnvMap& env) {
  TorchProbeOptions options;
  options.uid = ::geteuid();
  options.cache_dir = TorchCacheDir(env, options.uid).value_or("");
  return options;
}

TorchProbe TorchProbe::Start(const LaunchSpec& spec, const EnvMap& env, TorchProbeOptions options) {
  TorchProbe probe;
  probe.options_ = std::move(options);
  const std::vector<std::string> argv = TorchProbeArgv(spec);
  if (argv.empty()) {
    probe.answer_.how = "--no-python";
    return probe;
  }
  probe.python_ = spec.python;
  const EnvMap probe_env = TorchProbeEnv(spec, env);
  if (probe.options_.cwd.empty()) probe.options_.cwd = CurrentDir();
  if (!probe.options_.cache_dir.empty()) {
    probe.key_ = TorchCacheKey(argv, probe_env, probe.options_.cwd);
    if (auto hit = ReadTorchCacheFile(TorchCacheFile(probe.options_.cache_dir, probe.key_),
                                      probe.key_, probe.options_.uid)) {
      probe.answer_.state = hit->found ? RanksTorch::State::kFound : RanksTorch::State::kAbsent;
      probe.answer_.version = hit->version;
      probe.answer_.how = "from the cache; found by running " + probe.python_ + " earlier";
      return probe;
    }
  }
  probe.running_ = RunningCommand::Start(argv, probe_env, probe.options_.timeout_s);
  return probe;
}

TorchProbe::TorchProbe(TorchProbe&&) noexcept = default;
TorchProbe& TorchProbe::operator=(TorchProbe&&) noexcept = default;
TorchProbe::~TorchProbe() = default;

RanksTorch TorchProbe::Finish() {
  if (!running_) return answer_;
  const CommandOutcome outcome = running_->Finish();
  running_.reset();
  RanksTorch torch;
  torch.state = RanksTorch::State::kUnknown;
  const std::string& py = python_;
  std::ostringstream bound;
  bound << options_.timeout_s;
  switch (outcome.kind) {
    case CommandOutcome::Kind::kSpawnFailed:
      torch.how = "cannot run " + py + ": " + outcome.error;
      return torch;
    case CommandOutcome::Kind::kTimedOut:
      torch.how = py + " did not answer within " + bound.str() + " s";
      return torch;
    case CommandOutcome::Kind::kSignaled:
      torch.how = py + " was killed by signal " + std::to_string(outcome.code);
      return torch;
    case CommandOutcome::Kind::kExited:
      break;
  }
  const std::optional<TorchProbeReport> report = ParseTorchProbeOutput(outcome.out);
  if (outcome.code != 0 || !report) {
    torch.how = py + " exited with code " + std::to_string(outcome.code) +
                " without the answer (run it by hand: python -c 'import torch')";
    return torch;
  }
  TorchCacheEntry entry;
  entry.key = key_;
  entry.checks = report->checks;
  if (!report->version_file.empty()) {
    std::optional<std::string> version;
    if (report->version_text) version = ParseTorchVersionFile(*report->version_text);
    if (!version) {
      torch.how = "no __version__ in " + report->version_file;
      return torch;
    }
    torch.state = RanksTorch::State::kFound;
    torch.version = *version;
    entry.found = true;
    entry.version = *version;
    entry.version_file = report->version_file;
  } else {
    torch.state = RanksTorch::State::kAbsent;
  }
  torch.how = "found by running " + py + " once";
  if (options_.cache_dir.empty()) return torch;
  // An interpreter that runs Python in another root (a container, a chroot) reports files
  // that gculaunch does not see as it does: an entry for it could never be used.
  for (const auto& [path, signature] : entry.checks) {
    if (FileSignature(path) != signature) {
      torch.how += "; not cached: it does not see " + path + " as gculaunch does";
      return torch;
    }
  }
  if (WriteTorchCacheFile(options_.cache_dir, entry).ok()) torch.how += "; cached";
  return torch;
}

}  // namespace gculaunch::sys
