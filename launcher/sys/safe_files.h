// Files that gculaunch writes where another user might plant something, files a user names
// that gculaunch reads, and files a rank leaves for gculaunch (its error file, its stack
// dumps): created exclusively and never through a symlink, read with a bound, a rank's never
// through a link, never another user's, never blocking (docs/security.md).
//
// Thread safety: no state.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace gculaunch::sys {

/// Writes all of `text` to `fd` (retrying short writes and EINTR); the error is strerror.
Status WriteAll(int fd, std::string_view text);

/// Writes `text` to `path` whole: a temporary file is created beside it with mkstemp (O_EXCL:
/// never a file or symlink someone planted; the name is not predictable), given `mode`,
/// written, then renamed over `path` (a symlink at `path` is replaced, never followed).  The
/// error names `path` and the reason; the temporary file is removed on failure.
Status ReplaceFile(const std::string& path, std::string_view text, mode_t mode = 0644);

/// ReplaceFile relative to a held directory: `name` in `dirfd` gets `text` whole, through a
/// temporary ".<name>.<random>" opened with O_CREAT | O_EXCL | O_NOFOLLOW (never a file or
/// link someone planted) and renamed over `name` (a link there is replaced, never followed).
/// The error reads "cannot write <shown>: <reason>"; the temporary file is removed on failure.
Status ReplaceFileAt(int dirfd, const std::string& name, std::string_view text, mode_t mode,
                     const std::string& shown);

/// `chars` random letters and digits, for names that must not be guessed.
std::string RandomName(int chars);

/// Creates `dir` (and its parents) and writes `files` (name, text) into it with ReplaceFile,
/// readable by the ranks: the Python shim and the stack-dump hook.  The error starts with
/// `flag` and names the file and the reason.
Status WriteSiteDir(const std::string& flag, const std::string& dir,
                    const std::vector<std::pair<std::string_view, std::string_view>>& files);

/// The most gculaunch reads of a file a user names (a job file, a device profile, a password
/// file): 1 MiB.
inline constexpr size_t kMaxReadFileBytes = size_t{1} << 20;

/// Reads the regular file `path` whole, at most `limit` bytes: opened without blocking,
/// checked with fstat.  Errors (one line each, naming the file): it cannot be opened; it is
/// not a regular file (a device such as /dev/zero, a FIFO, a directory); it is larger than
/// `limit` (only `limit` + 1 bytes are ever read).
Result<std::string> ReadBoundedFile(const std::string& path, size_t limit = kMaxReadFileBytes);

/// How a file that a rank can create or replace is read (docs/security.md, "Files a rank can
/// name or create"): besides the rules above, a symbolic link at the path is refused rather
/// than followed, and so is a file of another owner.
struct RankFileRules {
  uid_t owner = 0;                   ///< the job's user: the only owner accepted
  size_t limit = kMaxReadFileBytes;  ///< the most bytes returned
  off_t offset = 0;                  ///< where reading starts (a dump appended to a file)
};

/// What ReadRankFile found.
struct RankFileText {
  bool found = false;         ///< false: nothing at the path (no other field is set)
  std::string text;           ///< at most `limit` bytes from `offset`
  bool cut = false;           ///< the file held more than `limit` bytes from `offset`
  std::int64_t mtime_ns = 0;  ///< its modification time (of the opened file), unix nanoseconds
};

/// Reads what a rank left at `path` once, through one descriptor: opened with O_NOFOLLOW |
/// O_NONBLOCK | O_CLOEXEC (a FIFO never blocks the caller, a link is never followed),
/// checked with fstat to be a regular file of `rules.owner`, read from `rules.offset` up to
/// `rules.limit` bytes (a larger file is cut there and says so; only `limit` + 1 bytes are
/// ever read).  Nothing at the path is not an error (`found` false).  Errors (one line each,
/// naming the file and why): it is a symbolic link, not a regular file (a FIFO, a device, a
/// directory, a socket), owned by another user, or cannot be opened or read.
Result<RankFileText> ReadRankFile(const std::string& path, const RankFileRules& rules);

/// What lstat says of a file a rank can create, without opening it: its size and
/// modification time when `path` is a regular file (not a link) of `owner`; none otherwise
/// (missing, a link, a FIFO, another owner's).
struct RankFileStat {
  off_t size = 0;
  std::int64_t mtime_ns = 0;  ///< unix nanoseconds
};
std::optional<RankFileStat> StatRankFile(const std::string& path, uid_t owner);

/// Whether `path` is a regular file (lstat: a symlink to one is not).
bool IsRegularFileNoFollow(const std::string& path);

}  // namespace gculaunch::sys
