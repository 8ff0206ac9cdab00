#include "launcher/sys/held_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <vector>

#include "launcher/sys/safe_files.h"

namespace gculaunch::sys {

namespace fs = std::filesystem;

namespace {

constexpr int kMaxLinks = 40;  // as the kernel's own limit on a path lookup

std::vector<std::string> Components(const std::string& rel) {
  std::vector<std::string> parts;
  for (const fs::path& part : fs::path(rel)) {
    const std::string name = part.string();
    if (name.empty() || name == "." || name == "/") continue;
    parts.push_back(name);
  }
  return parts;
}

int OpenDirAt(int dirfd, const std::string& name) {
  int fd;
  do {
    fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

std::string Reason(int err) {
  // O_NOFOLLOW | O_DIRECTORY on a symlink gives ELOOP or ENOTDIR.
  if (err == ELOOP) return "a symbolic link in its place (gculaunch never follows one here)";
  return std::strerror(err);
}

// Opens each of `parts` below `start` without following a link; a missing one is created
// with `mode` when `create`.  `shown` names the path in the error.
Result<UniqueFd> WalkDirs(int start, const std::vector<std::string>& parts, bool create,
                          const std::string& shown) {
  UniqueFd current(::fcntl(start, F_DUPFD_CLOEXEC, 0));
  if (!current.valid()) return SysError("cannot open " + shown, errno);
  std::string walked;
  for (const std::string& part : parts) {
    if (part == "..") return Error{"cannot open " + shown + ": '..' in the path", ""};
    walked += (walked.empty() ? "" : "/") + part;
    int fd = OpenDirAt(current.get(), part);
    if (fd < 0 && errno == ENOENT && create) {
      if (::mkdirat(current.get(), part.c_str(), 0777) != 0 && errno != EEXIST) {
        return SysError("cannot create " + shown + " (at '" + walked + "')", errno);
      }
      fd = OpenDirAt(current.get(), part);
    }
    if (fd < 0) {
      return Error{"cannot open " + shown + " (at '" + walked + "'): " + Reason(errno), ""};
    }
    current.Reset(fd);
  }
  return current;
}

std::string Octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "0%o", static_cast<unsigned>(mode & 07777));
  return text;
}

// Why someone other than `uid` and root could change the entries of `path`; none: nobody.
std::optional<std::string> ForeignWriter(const std::string& path, const struct stat& st,
                                         uid_t uid) {
  if (st.st_uid != uid && st.st_uid != 0) {
    return path + " is owned by another user (uid " + std::to_string(st.st_uid) + ")";
  }
  if (!S_ISDIR(st.st_mode)) return std::nullopt;
  const bool group_writes = (st.st_mode & S_IWGRP) != 0 && st.st_gid != 0;
  const bool others_write = (st.st_mode & S_IWOTH) != 0;
  if ((group_writes || others_write) && (st.st_mode & S_ISVTX) == 0) {
    return path + " is writable by other users and not sticky (mode " + Octal(st.st_mode) + ")";
  }
  return std::nullopt;
}

}  // namespace

Result<HeldDir> HeldDir::Open(const std::string& path) {
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) return Error{"cannot open " + path + ": " + ec.message(), ""};
  UniqueFd root(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) return SysError("cannot open /", errno);
  auto fd = WalkDirs(root.get(), Components(resolved.relative_path().string()), true, path);
  if (!fd.ok()) return fd.error();
  return HeldDir(std::make_shared<UniqueFd>(std::move(*fd)), path);
}

Result<HeldDir> HeldDir::MakeUniqueChild(const std::string& prefix) const {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string name = prefix + RandomName(6);
    if (::mkdirat(fd(), name.c_str(), 0700) != 0) {
      if (errno == EEXIST) continue;
      return SysError("cannot create a directory in " + path_, errno);
    }
    auto child = WalkDirs(fd(), {name}, false, PathOf(name));
    if (!child.ok()) return child.error();
    return HeldDir(std::make_shared<UniqueFd>(std::move(*child)), PathOf(name));
  }
  return Error{"cannot create a directory in " + path_ + ": every name tried exists", ""};
}

Status HeldDir::MakeDirs(const std::string& rel) const {
  auto dir = WalkDirs(fd(), Components(rel), true, PathOf(rel));
  if (!dir.ok()) return dir.error();
  return OkStatus();
}

Result<HeldDir::Parent> HeldDir::ParentOf(const std::string& rel) const {
  std::vector<std::string> parts = Components(rel);
  if (parts.empty()) return Error{"cannot open " + PathOf(rel) + ": no file name", ""};
  Parent parent;
  parent.name = parts.back();
  parts.pop_back();
  auto dir = WalkDirs(fd(), parts, true, PathOf(rel));
  if (!dir.ok()) return dir.error();
  parent.dir = std::move(*dir);
  return parent;
}

Result<UniqueFd> HeldDir::OpenFile(const std::string& rel, int flags, mode_t mode) const {
  auto parent = ParentOf(rel);
  if (!parent.ok()) return parent.error();
  const UniqueFd& dir = parent->dir;
  const std::string& name = parent->name;
  int file;
  do {
    file = ::openat(dir.get(), name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode);
  } while (file < 0 && errno == EINTR);
  if (file < 0) return Error{"cannot open " + PathOf(rel) + ": " + Reason(errno), ""};
  return UniqueFd(file);
}

Status HeldDir::WriteFile(const std::string& rel, std::string_view text, mode_t mode) const {
  auto parent = ParentOf(rel);
  if (!parent.ok()) return parent.error();
  return ReplaceFileAt(parent->dir.get(), parent->name, text, mode, PathOf(rel));
}

std::string HeldDir::PathOf(const std::string& rel) const {
  return rel.empty() ? path_ : path_ + "/" + rel;
}

std::string PrivateRuntimeDir(const std::string& xdg_runtime_dir, uid_t uid) {
  if (xdg_runtime_dir.empty() || xdg_runtime_dir.front() != '/') return "";
  struct stat st {};
  if (::lstat(xdg_runtime_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != uid ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return "";
  }
  std::string dir = xdg_runtime_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

std::optional<std::string> FindForeignWriter(const std::string& path, uid_t uid) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  if (ec) return "cannot check " + path + ": " + ec.message();
  std::deque<std::string> todo;
  for (const std::string& part : Components(absolute.relative_path().string())) {
    todo.push_back(part);
  }
  std::string current = "/";
  struct stat st {};
  if (::lstat("/", &st) != 0) return "cannot check /: " + std::string(std::strerror(errno));
  if (auto why = ForeignWriter("/", st, uid)) return why;
  int links = 0;
  while (!todo.empty()) {
    const std::string name = todo.front();
    todo.pop_front();
    if (name == "..") {
      current = fs::path(current).parent_path().string();
      continue;
    }
    const std::string next = current == "/" ? "/" + name : current + "/" + name;
    if (::lstat(next.c_str(), &st) != 0) {
      if (errno == ENOENT) return std::nullopt;  // created by gculaunch, as the job's user
      return "cannot check " + next + ": " + std::strerror(errno);
    }
    if (S_ISLNK(st.st_mode)) {
      // The link's own directory (`current`) passed; now what it points to.
      if (++links > kMaxLinks) return next + ": too many levels of symbolic links";
      std::error_code link_ec;
      const fs::path target = fs::read_symlink(next, link_ec);
      if (link_ec) return "cannot check " + next + ": " + link_ec.message();
      if (target.is_absolute()) current = "/";
      const std::vector<std::string> parts = Components(target.string());
      todo.insert(todo.begin(), parts.begin(), parts.end());
      continue;
    }
    if (auto why = ForeignWriter(next, st, uid)) return why;
    current = next;
  }
  return std::nullopt;
}

}  // namespace gculaunch::sys
