#include "launcher/sys/torch_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <sstream>

#include "base/text.h"
#include "launcher/sys/safe_files.h"

namespace gculaunch::sys {
namespace {

// Format 2 added the interpreter (executable, pyenv_version); a format-1 entry is a miss.
constexpr std::string_view kHeader = "gculaunch torch cache 2";
constexpr size_t kMaxEntryBytes = 1 << 16;
constexpr int kMaxLinks = 40;  // as the kernel's own limit on a path lookup

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

bool IsEntryName(const std::string& name) {
  return name.size() == 16 && name.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// One "name hex" line of an entry into `entry`; false for a line that is not one.
bool ParseField(const std::vector<std::string>& words, TorchCacheEntry& entry, bool& has_key,
                bool& has_found) {
  if (words.size() == 2 && words[0] == "found" && (words[1] == "0" || words[1] == "1")) {
    entry.found = words[1] == "1";
    has_found = true;
    return true;
  }
  if (words.size() == 3 && words[0] == "check") {
    auto path = Unhex(words[1]);
    auto signature = Unhex(words[2]);
    if (!path || !signature) return false;
    entry.checks.emplace_back(std::move(*path), std::move(*signature));
    return true;
  }
  if (words.size() != 2) return false;
  auto value = Unhex(words[1]);
  if (!value) return false;
  std::string* field = words[0] == "key"             ? &entry.key
                       : words[0] == "version"       ? &entry.version
                       : words[0] == "version_file"  ? &entry.version_file
                       : words[0] == "executable"    ? &entry.executable
                       : words[0] == "pyenv_version" ? &entry.pyenv_version
                                                     : nullptr;
  if (field == nullptr) return false;
  *field = std::move(*value);
  has_key = has_key || words[0] == "key";
  return true;
}

// ---- the walk to the cache directory ----

std::string Octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "0%o", static_cast<unsigned>(mode & 07777));
  return text;
}

// Why the directory `shown` (fstat'ed as `st`) may not be trusted; "" when it may.  `own`:
// one of gculaunch's own two, which must be the user's alone.
std::string Untrusted(const std::string& shown, const struct stat& st, uid_t uid, bool own) {
  if (!S_ISDIR(st.st_mode)) return shown + " is not a directory";
  if (own) {
    if (st.st_uid != uid) {
      return shown + " is owned by uid " + std::to_string(st.st_uid) + ", not by the user";
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      return shown + " is writable by other users (mode " + Octal(st.st_mode) + ")";
    }
    return "";
  }
  if (st.st_uid != uid && st.st_uid != 0) {
    return shown + " is owned by another user (uid " + std::to_string(st.st_uid) + ")";
  }
  const bool group_writes = (st.st_mode & S_IWGRP) != 0 && st.st_gid != 0;
  const bool others_write = (st.st_mode & S_IWOTH) != 0;
  if ((group_writes || others_write) && (st.st_mode & S_ISVTX) == 0) {
    return shown + " is writable by other users and not sticky (mode " + Octal(st.st_mode) + ")";
  }
  return "";
}

struct Step {
  std::string name;
  bool own = false;  ///< gculaunch/ or torch-versions/
};

std::deque<Step> StepsOf(const std::string& path, bool own) {
  std::deque<Step> steps;
  for (const std::string& part : Split(path, '/')) {
    if (part.empty() || part == ".") continue;
    steps.push_back({part, own});
  }
  return steps;
}

// The walk's state: the directory reached, and its path for messages.
struct Walk {
  UniqueFd dir;
  std::string shown;
  int links = 0;
};

// Opens "/" as the walk's start.
Status StartAtRoot(Walk& walk, uid_t uid) {
  walk.dir.Reset(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  walk.shown = "/";
  struct stat st {};
  if (!walk.dir.valid() || ::fstat(walk.dir.get(), &st) != 0)
    return SysError("cannot open /", errno);
  if (std::string why = Untrusted("/", st, uid, false); !why.empty()) return Error{why, ""};
  return OkStatus();
}

std::string Joined(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

// A symbolic link met on the way: checked, and its target's steps put first.
Status FollowLink(Walk& walk, const Step& step, const struct stat& st, uid_t uid,
                  std::deque<Step>& todo) {
  const std::string shown = Joined(walk.shown, step.name);
  if (step.own) return Error{shown + " is a symbolic link (gculaunch never follows one here)", ""};
  if (st.st_uid != uid && st.st_uid != 0) {
    return Error{
        shown + " is a symbolic link owned by another user (uid " + std::to_string(st.st_uid) + ")",
        ""};
  }
  if (++walk.links > kMaxLinks) return Error{shown + ": too many levels of symbolic links", ""};
  char target[PATH_MAX];
  const ssize_t n = ::readlinkat(walk.dir.get(), step.name.c_str(), target, sizeof target);
  if (n < 0 || static_cast<size_t>(n) >= sizeof target)
    return SysError("cannot read " + shown, errno);
  const std::string text(target, static_cast<size_t>(n));
  std::deque<Step> steps = StepsOf(text, false);
  todo.insert(todo.begin(), steps.begin(), steps.end());
  if (!text.empty() && text.front() == '/') return StartAtRoot(walk, uid);
  return OkStatus();
}

// One step of the walk: `step` in the current directory, made when missing and `create`.
Status TakeStep(Walk& walk, uid_t uid, bool create, std::deque<Step>& todo) {
  const Step step = todo.front();
  todo.pop_front();
  const std::string shown = Joined(walk.shown, step.name);
  struct stat st {};
  for (int attempt = 0;; ++attempt) {
    if (::fstatat(walk.dir.get(), step.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) break;
    if (errno != ENOENT || attempt > 0) return SysError("cannot look at " + shown, errno);
    if (!create) return Error{shown + " does not exist yet", ""};
    if (::mkdirat(walk.dir.get(), step.name.c_str(), 0700) != 0 && errno != EEXIST) {
      return SysError("cannot create " + shown, errno);
    }
  }
  if (S_ISLNK(st.st_mode)) return FollowLink(walk, step, st, uid, todo);
  UniqueFd next(
      ::openat(walk.dir.get(), step.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  // What was looked at a moment ago may have been replaced since; the descriptor decides.
  if (!next.valid() || ::fstat(next.get(), &st) != 0)
    return SysError("cannot open " + shown, errno);
  if (std::string why = Untrusted(shown, st, uid, step.own); !why.empty()) return Error{why, ""};
  walk.dir = std::move(next);
  walk.shown = shown;
  return OkStatus();
}

// Reads at most kMaxEntryBytes of the regular file `name` in `dir` that `uid` owns and nobody
// else may write; nullopt for anything else.
std::optional<std::string> ReadOwnFile(int dir, const std::string& name, uid_t uid, size_t limit) {
  UniqueFd fd(
      ::openat(dir, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
  if (!fd.valid()) return std::nullopt;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != uid ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 || st.st_size > static_cast<off_t>(kMaxEntryBytes)) {
    return std::nullopt;
  }
  std::string text;
  char buffer[8192];
  while (text.size() < limit) {
    const ssize_t n = ::read(fd.get(), buffer, std::min(sizeof buffer, limit - text.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

}  // namespace

std::string CacheHex(std::string_view bytes) {
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

std::string CacheHash(std::string_view bytes) {
  std::uint64_t h = 1469598103934665603ULL;
  for (char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return text;
}

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
  out += "key " + CacheHex(entry.key) + "\n";
  out += "found " + std::string(entry.found ? "1" : "0") + "\n";
  if (entry.found) {
    out += "version " + CacheHex(entry.version) + "\n";
    out += "version_file " + CacheHex(entry.version_file) + "\n";
  }
  if (!entry.executable.empty()) out += "executable " + CacheHex(entry.executable) + "\n";
  if (!entry.pyenv_version.empty()) out += "pyenv_version " + CacheHex(entry.pyenv_version) + "\n";
  for (const auto& [path, signature] : entry.checks) {
    out += "check " + CacheHex(path) + " " + CacheHex(signature) + "\n";
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
    if (!ParseField(Split(lines[i], ' '), entry, has_key, has_found)) return std::nullopt;
  }
  if (!has_key || !has_found) return std::nullopt;
  if (entry.found && (entry.version.empty() || entry.version_file.empty())) return std::nullopt;
  return entry;
}

Result<TorchCacheDir> TorchCacheDir::Open(const EnvMap& env, uid_t uid, bool create) {
  const std::string xdg = env.GetOr("XDG_CACHE_HOME", "");
  const std::string home = env.GetOr("HOME", "");
  std::string base;
  if (!xdg.empty() && xdg.front() == '/') {
    base = xdg;
  } else if (!home.empty() && home.front() == '/') {
    base = home + "/.cache";
  } else {
    return Error{"no cache: neither XDG_CACHE_HOME nor HOME is an absolute path", ""};
  }
  std::deque<Step> todo = StepsOf(base, false);
  todo.push_back({"gculaunch", true});
  todo.push_back({"torch-versions", true});
  Walk walk;
  if (Status started = StartAtRoot(walk, uid); !started.ok()) return started.error();
  while (!todo.empty()) {
    if (Status step = TakeStep(walk, uid, create, todo); !step.ok()) return step.error();
  }
  std::string shown = base;
  while (shown.size() > 1 && shown.back() == '/') shown.pop_back();
  return TorchCacheDir(std::make_shared<UniqueFd>(std::move(walk.dir)),
                       shown + "/gculaunch/torch-versions", uid);
}

std::string TorchCacheDir::FileName(const std::string& key) { return CacheHash(key); }

std::optional<TorchCacheEntry> TorchCacheDir::Read(const std::string& key) const {
  std::optional<std::string> text =
      ReadOwnFile(fd_->get(), FileName(key), uid_, kMaxEntryBytes + 1);
  if (!text || text->size() > kMaxEntryBytes) return std::nullopt;
  std::optional<TorchCacheEntry> entry = ParseTorchCacheEntry(*text);
  if (!entry || entry->key != key) return std::nullopt;
  for (const auto& [checked, signature] : entry->checks) {
    if (FileSignature(checked) != signature) return std::nullopt;
  }
  return entry;
}

Status TorchCacheDir::Write(const TorchCacheEntry& entry) const {
  const std::string name = FileName(entry.key);
  if (Status written =
          ReplaceFileAt(fd_->get(), name, FormatTorchCacheEntry(entry), 0600, path_ + "/" + name);
      !written.ok()) {
    return written;
  }
  Prune(kMaxEntries);
  return OkStatus();
}

void TorchCacheDir::Prune(size_t keep) const {
  UniqueFd listing(::openat(fd_->get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!listing.valid()) return;
  DIR* dir = ::fdopendir(listing.get());
  if (dir == nullptr) return;
  listing.Release();  // the DIR owns it now
  std::vector<std::string> names;
  while (const dirent* item = ::readdir(dir)) {
    if (IsEntryName(item->d_name)) names.emplace_back(item->d_name);
  }
  ::closedir(dir);
  if (names.size() <= keep) return;
  // Only gculaunch's own entries count and go: a file of the user's with such a name but
  // without the marker is left alone.
  std::vector<std::pair<std::int64_t, std::string>> entries;
  for (const std::string& name : names) {
    const std::optional<std::string> head =
        ReadOwnFile(fd_->get(), name, uid_, kTorchCacheMarker.size());
    if (!head || head->rfind(kTorchCacheMarker, 0) != 0) continue;
    struct stat st {};
    if (::fstatat(fd_->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    entries.emplace_back(
        static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec, name);
  }
  if (entries.size() <= keep) return;
  std::sort(entries.begin(), entries.end());
  for (size_t i = 0; i + keep < entries.size(); ++i) {
    ::unlinkat(fd_->get(), entries[i].second.c_str(), 0);
  }
}

}  // namespace gculaunch::sys
