// Files that gculaunch writes where another user might plant something, and files a user
// names that gculaunch reads: created exclusively and never through a symlink, read with a
// bound (docs/security.md).
//
// Thread safety: no state.
#pragma once

#include <sys/types.h>

#include <cstddef>
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

/// Whether `path` is a regular file (lstat: a symlink to one is not).
bool IsRegularFileNoFollow(const std::string& path);

}  // namespace gculaunch::sys
