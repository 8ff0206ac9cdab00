// OffLoop: one worker thread for the calls that must not delay the event loop: reads of
// another process's /proc files that can wait on its locks (smaps_rollup waits on the memory
// map lock of a process stuck in a page fault), walks of /proc/<pid>/task with a system call
// per thread.  Each job's result is posted back to the io_context, where its `done` runs.
//
//   OffLoop off(io);
//   off.Run<Result<TaskStatus>>([pid] { return ReadTaskStatus(pid); },
//                               lifetime_.Wrap([this](Result<TaskStatus> s) { ... }));
//
// Jobs run one at a time, in the order given; their `done`s run on the io_context in the same
// order.  A job must use only what it captured by value (never the caller's members): it may
// still run after the caller is gone.
//
// Lifetime: the destructor never waits for a job (one may be stuck in the kernel).  It tells
// the thread to stop after the job it is running, drops the jobs not started and every result
// not yet posted, and detaches the thread; a `done` already posted still runs, so wrap it in
// the caller's LifetimeGuard.  The io_context must outlive the OffLoop.
// Thread safety: Run() from the io_context's thread; `done` runs there.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <functional>
#include <memory>
#include <utility>

namespace gculaunch::sys {

class OffLoop {
 public:
  explicit OffLoop(boost::asio::io_context& io);
  ~OffLoop();
  OffLoop(const OffLoop&) = delete;
  OffLoop& operator=(const OffLoop&) = delete;

  /// Runs `work()` on the worker thread, then `done(result)` on the io_context.
  template <typename T>
  void Run(std::function<T()> work, std::function<void(T)> done) {
    Queue([work = std::move(work), done = std::move(done)](const Poster& post) mutable {
      post([done = std::move(done), result = work()]() mutable { done(std::move(result)); });
    });
  }

  /// Jobs given whose work has not finished yet (the one running included); a job stops
  /// counting when its result is handed to the loop, before its `done` runs.
  size_t pending() const;

 private:
  /// Posts a handler to the io_context unless the OffLoop is gone.
  using Poster = std::function<void(std::function<void()>)>;
  struct Shared;
  static void Work(const std::shared_ptr<Shared>& shared);
  void Queue(std::function<void(const Poster&)> job);

  std::shared_ptr<Shared> shared_;
};

}  // namespace gculaunch::sys
