#include "launcher/run/output_writer.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

namespace gculaunch {

std::shared_ptr<OutputTarget> OutputTarget::Borrowed(int fd, std::string name) {
  std::shared_ptr<OutputTarget> target(new OutputTarget(fd, sys::UniqueFd(), std::move(name)));
  struct stat st {};
  if (::isatty(fd) == 1 && ::fstat(fd, &st) == 0) {
    target->terminal_ = true;
    target->rdev_ = static_cast<uint64_t>(st.st_rdev);
  }
  return target;
}

std::shared_ptr<OutputTarget> OutputTarget::Owned(sys::UniqueFd fd, std::string name) {
  const int raw = fd.get();
  return std::shared_ptr<OutputTarget>(new OutputTarget(raw, std::move(fd), std::move(name)));
}

Result<std::shared_ptr<OutputTarget>> OutputTarget::FileForTest(const std::string& path) {
  auto fd = sys::OpenCloexec(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);
  if (!fd.ok()) return fd.error();
  return Owned(std::move(*fd), path);
}

OutputWriter::OutputWriter(Limits limits, std::function<void()> on_space)
    : limits_(limits), on_space_(std::move(on_space)), thread_([this] { Run(); }) {}

OutputWriter::~OutputWriter() { Finish(std::chrono::milliseconds(0)); }

bool OutputWriter::Write(const TargetPtr& target, std::string bytes, const void* owner) {
  return Queue({target, std::move(bytes), owner, false}, false);
}

bool OutputWriter::WriteProgress(const TargetPtr& target, std::string bytes, const void* owner) {
  return Queue({target, std::move(bytes), owner, true}, false);
}

void OutputWriter::Urgent(const TargetPtr& target, std::string bytes) {
  Queue({target, std::move(bytes), nullptr, false}, true);
}

bool OutputWriter::Queue(Chunk chunk, bool urgent) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Counted as queued, not as written: a terminal's added bytes are not counted at all.
  queued_bytes_ += chunk.bytes.size();
  queue_.push_back(std::move(chunk));
  if (!urgent && queued_bytes_ > limits_.high_water) congested_ = true;
  wake_.notify_one();
  return !congested_;
}

void OutputWriter::set_warnings(TargetPtr target) {
  std::lock_guard<std::mutex> lock(mutex_);
  warnings_ = std::move(target);
}

bool OutputWriter::congested() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return congested_;
}

bool OutputWriter::Finish(std::chrono::milliseconds timeout) {
  if (finished_) return true;
  finished_ = true;
  bool drained;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    drained = drained_.wait_for(lock, timeout, [this] { return queued_bytes_ == 0; });
    stopping_ = true;
    wake_.notify_one();
  }
  if (drained) {
    thread_.join();
  } else {
    // The thread is blocked in write() on a terminal or pipe nobody drains.
    // It owns nothing but the queue; let the process exit around it.
    thread_.detach();
  }
  return drained;
}

bool OutputWriter::WaitDrained(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return drained_.wait_for(lock, timeout, [this] { return queued_bytes_ == 0; });
}

void OutputWriter::Run() {
  std::deque<Chunk> batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;  // stopping, and everything was written
      batch.swap(queue_);
    }
    size_t done = 0;
    for (const Chunk& chunk : batch) done += chunk.bytes.size();
    WriteChunks(batch);  // may add terminal control bytes, not counted in `done`
    batch.clear();
    bool notify_space = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queued_bytes_ -= done;
      if (congested_ && queued_bytes_ < limits_.low_water) {
        congested_ = false;
        notify_space = true;
      }
      if (queued_bytes_ == 0) drained_.notify_all();
    }
    if (notify_space && on_space_) on_space_();
  }
}

namespace {

// Writes all of `iov` to `fd` with blocking semantics.  Returns 0 or errno.
int WriteFully(int fd, std::vector<iovec>& iov) {
  size_t first = 0;
  while (first < iov.size()) {
    const int count = static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX));
    const ssize_t n = ::writev(fd, iov.data() + first, count);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        // Someone else set O_NONBLOCK on a shared description: wait for room.
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, -1);
        continue;
      }
      return errno;
    }
    size_t left = static_cast<size_t>(n);
    while (first < iov.size() && left >= iov[first].iov_len) {
      left -= iov[first].iov_len;
      ++first;
    }
    if (left > 0) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return 0;
}

}  // namespace

namespace {

// `text` cut to `columns` - 1 characters (UTF-8 code points), so a redraw never wraps.
void FitWidth(int fd, std::string& text) {
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) != 0 || ws.ws_col < 2) return;
  size_t chars = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) continue;  // continuation byte
    if (++chars == ws.ws_col) {
      text.resize(i);
      return;
    }
  }
}

constexpr std::string_view kRedraw = "\r\x1b[K";  // to the line's start, clear it

}  // namespace

// Writer thread: adds what a live progress bar needs on a terminal.
void OutputWriter::ShapeForTerminal(Chunk& chunk) {
  const bool bar_open = bar_target_ != nullptr && bar_target_->SameTerminal(*chunk.target);
  const bool own_bar = bar_open && bar_owner_ == chunk.owner && chunk.owner != nullptr &&
                       bar_target_ == chunk.target;
  std::string head;
  if (own_bar) {
    head = kRedraw;  // a redraw, or the final state replacing the bar
  } else if (bar_open) {
    head = "\n";  // end the other bar's line first
  }
  if (chunk.progress) {
    FitWidth(chunk.target->fd(), chunk.bytes);
    if (!own_bar) head += kRedraw;
    bar_target_ = chunk.target;
    bar_owner_ = chunk.owner;
  } else if (bar_open) {
    bar_target_ = nullptr;
    bar_owner_ = nullptr;
  }
  if (!head.empty()) chunk.bytes.insert(0, head);
}

void OutputWriter::WriteChunks(std::deque<Chunk>& chunks) {
  for (Chunk& chunk : chunks) {
    if (chunk.target->terminal() && !chunk.bytes.empty()) ShapeForTerminal(chunk);
  }
  std::vector<iovec> iov;
  size_t i = 0;
  while (i < chunks.size()) {
    // One writev per run of chunks for the same target.
    const TargetPtr& target = chunks[i].target;
    iov.clear();
    size_t bytes = 0;
    size_t j = i;
    for (; j < chunks.size() && chunks[j].target == target; ++j) {
      if (chunks[j].bytes.empty()) continue;
      iov.push_back({chunks[j].bytes.data(), chunks[j].bytes.size()});
      bytes += chunks[j].bytes.size();
    }
    if (target->failed()) {
      bytes_dropped_ += bytes;
      if (target->file()) log_bytes_dropped_ += bytes;
    } else if (const int err = WriteFully(target->fd(), iov); err != 0) {
      bytes_dropped_ += bytes;
      if (target->file()) log_bytes_dropped_ += bytes;
      LostOutput(*target, err, bytes);
    } else {
      bytes_written_ += bytes;
      if (target->lost_ > 0 && target->file()) {
        Warn("writing " + target->name() + " again; " + std::to_string(target->lost_) +
             " bytes of it were lost while it could not be written");
      }
      target->lost_ = 0;
    }
    i = j;
  }
}

// Writer thread: `bytes` for `target` were not written (errno `err`).  A full disk drops
// only these bytes; anything else drops the target for good.  A log file's first loss is
// one warning line.
void OutputWriter::LostOutput(OutputTarget& target, int err, size_t bytes) {
  const bool space = err == ENOSPC || err == EDQUOT || err == EFBIG;
  if (!space) target.MarkFailed();
  const bool first = target.lost_ == 0;
  target.lost_ += bytes;
  if (!first || !target.file()) return;  // a console has nowhere else to say it
  Warn("cannot write " + target.name() + ": " + std::strerror(err) +
       (space ? "; its output is lost until there is space again (fix: free space on that "
                "file system, or give --log-dir another one)"
              : "; its later output is lost (fix: check the file system of --log-dir)"));
}

// Writer thread: one line of gculaunch's own on the warnings target (queued: written next).
void OutputWriter::Warn(const std::string& line) {
  TargetPtr target;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    target = warnings_;
  }
  if (target) Queue({target, "gculaunch: warning: " + line + "\n", nullptr, false}, true);
}

}  // namespace gculaunch
