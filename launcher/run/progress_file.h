// ProgressFile: the number --progress-file holds, read without ever blocking the event loop.
//
// The training script rewrites the file with its step or checkpoint number; after a failed
// attempt the Supervisor reads it, and the failure streak (failure_streak.h) stops the loop
// when the number no longer rises.  The file belongs to the ranks, so it is read as anything a
// rank controls is (sys::ReadRankFile: never through a symlink, a regular file only, at most
// kMaxProgressFileBytes), and it may live on a network file system where a read can hang:
// Read() reads on a thread of its own and hands the answer to the io_context, or gives up
// after `bound` with "no number" (that thread then finishes on its own and its answer is
// dropped).  One read at a time; a new Read() abandons the one before.
//
//   ProgressFile progress(io, "/ckpt/step");
//   progress.Read([](ProgressReading r) { ... r.value (1200), r.note ("" or why none) ... });
//
// Lifetime: `done` runs on the io_context, never inline and never after the ProgressFile is
// destroyed; the io_context must outlive it.
// Thread safety: the io_context's thread only (the reading thread touches only its own copy
// of the path and a shared flag).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/lifetime.h"

namespace gculaunch {

/// The most gculaunch reads of a progress file: a number needs a few bytes.
inline constexpr std::size_t kMaxProgressFileBytes = 4096;

struct ProgressReading {
  std::optional<std::int64_t> value;  ///< none: see `note`
  std::string note;  ///< why there is no number ("no such file", ...); "" with a value
};

/// The number a progress file holds: its first word, a whole number >= 0 ("1200\n" -> 1200);
/// nullopt for anything else.
std::optional<std::int64_t> ParseProgress(std::string_view text);

class ProgressFile {
 public:
  static constexpr std::chrono::milliseconds kBound{2000};

  ProgressFile(boost::asio::io_context& io, std::string path,
               std::chrono::milliseconds bound = kBound);
  ~ProgressFile();
  ProgressFile(const ProgressFile&) = delete;
  ProgressFile& operator=(const ProgressFile&) = delete;

  /// Reads the file; `done` gets the number, or none with the reason.
  void Read(std::function<void(ProgressReading)> done);
  const std::string& path() const { return path_; }

 private:
  struct Shared;
  void Answer(const std::shared_ptr<Shared>& read, ProgressReading reading);
  void Abandon();

  boost::asio::io_context& io_;
  std::string path_;
  std::chrono::milliseconds bound_;
  boost::asio::steady_timer timer_;
  std::shared_ptr<Shared> current_;  ///< the read under way; null: none
  std::function<void(ProgressReading)> done_;
  LifetimeGuard lifetime_;  ///< last member: expires first
};

}  // namespace gculaunch
