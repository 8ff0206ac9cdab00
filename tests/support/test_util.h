// Helpers shared by the unit tests: temporary directories, the helper rank
// program, FIFOs for readiness handshakes, and a bounded io_context runner.
//
// Thread safety: test code runs on one thread.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace gculaunch::testing {

/// A fresh directory under $TMPDIR (or /tmp), removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  /// Creates the file `relative` (and its directories) with `content`; returns its path.
  std::string Write(const std::string& relative, const std::string& content = "") const;

 private:
  std::string path_;
};

/// Path of gculaunch_test_child (set by CMake).
std::string TestChild();
/// Path of gculaunch_no_pidfd (set by CMake).
std::string NoPidfdHelper();

/// The whole file, or "" when it does not exist.
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& text);

/// Creates a FIFO at `path`.
void MakeFifo(const std::string& path);
/// Opens the FIFO for reading (blocks until a writer opens it) and returns
/// everything written until the writer closes it.  With `lines` > 1, keeps
/// re-opening until that many newline-terminated lines arrived (several
/// writers, one after the other).
std::string ReadFifo(const std::string& path, int lines = 1);

/// Runs `io` one handler at a time until `done()` is true.  A guard timer
/// fails the run (returns false) after `limit`, so a broken test fails
/// instead of hanging; it is not a timing assertion.
bool RunUntil(boost::asio::io_context& io, const std::function<bool()>& done,
              std::chrono::seconds limit = std::chrono::seconds(60));

/// Whether `pid` exists and is not a zombie.
bool ProcessAlive(pid_t pid);

/// Installs a seccomp filter in the calling process that makes pidfd_open(2)
/// fail with `err` (after PR_SET_NO_NEW_PRIVS).  Irreversible: call it in a
/// forked child.  Returns false if the kernel refused.
bool DisablePidfdOpen(int err);

}  // namespace gculaunch::testing
