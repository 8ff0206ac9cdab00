#include "launcher/sys/safe_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "launcher/sys/unique_fd.h"

namespace gculaunch::sys {

namespace {

std::string KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

std::string Size(size_t bytes) {
  if (bytes % (size_t{1} << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

// At most `most` bytes of `fd` from `offset` (pread: the descriptor's position is not used).
Result<std::string> ReadUpTo(int fd, const std::string& path, off_t offset, size_t most) {
  std::string text;
  char buffer[65536];
  while (text.size() < most) {
    const ssize_t n = ::pread(fd, buffer, std::min(sizeof buffer, most - text.size()),
                              offset + static_cast<off_t>(text.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error{"cannot read '" + path + "': " + std::strerror(errno), ""};
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

}  // namespace

Status WriteAll(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error{std::strerror(errno), ""};
    text.remove_prefix(static_cast<size_t>(n));
  }
  return OkStatus();
}

Result<std::string> ReadBoundedFile(const std::string& path, size_t limit) {
  // O_NONBLOCK: a FIFO opens at once (and is refused below) instead of waiting for a writer.
  const int raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (raw < 0) return Error{"cannot read '" + path + "': " + std::strerror(errno), ""};
  UniqueFd fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return Error{"cannot read '" + path + "': " + std::strerror(errno), ""};
  }
  if (!S_ISREG(st.st_mode)) {
    return Error{"'" + path + "' is " + KindOf(st.st_mode) + ", not a regular file",
                 "name a regular file"};
  }
  auto text = ReadUpTo(fd.get(), path, 0, limit + 1);
  if (!text.ok()) return text.error();
  if (text->size() > limit) {
    return Error{"'" + path + "' is larger than " + Size(limit) +
                     ", the most gculaunch reads of a file it is given",
                 "name the right file (job files, device profiles and password files are far "
                 "smaller)"};
  }
  return std::move(*text);
}

Result<RankFileText> ReadRankFile(const std::string& path, const RankFileRules& rules) {
  int raw;
  do {
    raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW);
  } while (raw < 0 && errno == EINTR);
  if (raw < 0 && errno == ENOENT) return RankFileText{};
  // O_NOFOLLOW on a symlink: ELOOP.
  if (raw < 0 && errno == ELOOP) {
    return Error{"'" + path + "' is a symbolic link (gculaunch does not follow one there)", ""};
  }
  if (raw < 0) return Error{"cannot read '" + path + "': " + std::strerror(errno), ""};
  UniqueFd fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return Error{"cannot read '" + path + "': " + std::strerror(errno), ""};
  }
  if (!S_ISREG(st.st_mode)) {
    return Error{"'" + path + "' is " + KindOf(st.st_mode) + ", not a regular file", ""};
  }
  if (st.st_uid != rules.owner) {
    return Error{"'" + path + "' is owned by uid " + std::to_string(st.st_uid) +
                     ", not by the job's user (uid " + std::to_string(rules.owner) + ")",
                 ""};
  }
  auto text = ReadUpTo(fd.get(), path, rules.offset, rules.limit + 1);
  if (!text.ok()) return text.error();
  RankFileText read;
  read.found = true;
  read.cut = text->size() > rules.limit;
  if (read.cut) text->resize(rules.limit);
  read.text = std::move(*text);
  read.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return read;
}

std::optional<RankFileStat> StatRankFile(const std::string& path, uid_t owner) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != owner) {
    return std::nullopt;
  }
  return RankFileStat{
      st.st_size, static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

Status ReplaceFile(const std::string& path, std::string_view text, mode_t mode) {
  const std::filesystem::path target(path);
  const std::string dir = target.has_parent_path() ? target.parent_path().string() : ".";
  std::string temp = dir + "/." + target.filename().string() + ".XXXXXX";
  const int raw = ::mkostemp(temp.data(), O_CLOEXEC);
  if (raw < 0) {
    return Error{"cannot write " + path + ": cannot create a temporary file in " + dir + ": " +
                     std::strerror(errno),
                 "check that the directory exists and is writable"};
  }
  UniqueFd fd(raw);
  Status written = WriteAll(fd.get(), text);
  if (written.ok() && ::fchmod(fd.get(), mode) != 0) written = Error{std::strerror(errno), ""};
  if (written.ok() && ::close(fd.Release()) != 0) written = Error{std::strerror(errno), ""};
  if (written.ok() && ::rename(temp.c_str(), path.c_str()) != 0) {
    written = Error{std::strerror(errno), ""};
  }
  if (!written.ok()) {
    ::unlink(temp.c_str());
    return Error{"cannot write " + path + ": " + written.error().what,
                 "check the path, its permissions and the free space"};
  }
  return OkStatus();
}

Status ReplaceFileAt(int dirfd, const std::string& name, std::string_view text, mode_t mode,
                     const std::string& shown) {
  const std::string temp = "." + name + "." + RandomName(8);
  UniqueFd file(
      ::openat(dirfd, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!file.valid()) return SysError("cannot write " + shown, errno);
  Status written = WriteAll(file.get(), text);
  if (written.ok() && ::fchmod(file.get(), mode) != 0) written = Error{std::strerror(errno), ""};
  if (written.ok() && ::close(file.Release()) != 0) written = Error{std::strerror(errno), ""};
  if (written.ok() && ::renameat(dirfd, temp.c_str(), dirfd, name.c_str()) != 0) {
    written = Error{std::strerror(errno), ""};
  }
  if (!written.ok()) {
    ::unlinkat(dirfd, temp.c_str(), 0);
    return Error{"cannot write " + shown + ": " + written.error().what, ""};
  }
  return OkStatus();
}

std::string RandomName(int chars) {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::random_device random;
  std::uniform_int_distribution<size_t> pick(0, sizeof kChars - 2);
  std::string out;
  for (int i = 0; i < chars; ++i) out += kChars[pick(random)];
  return out;
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
    if (Status written = ReplaceFile(path, text, 0644); !written.ok()) {
      return Error{flag + ": " + written.error().what,
                   "check the permissions and free space of --log-dir (or of the temporary "
                   "directory)"};
    }
  }
  return OkStatus();
}

bool IsRegularFileNoFollow(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace gculaunch::sys
