#include "launcher/sys/off_loop.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace gculaunch::sys {

// What the thread and the OffLoop share; the thread keeps it alive after the OffLoop is gone.
struct OffLoop::Shared {
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::function<void(const Poster&)>> jobs;
  boost::asio::io_context* io = nullptr;  ///< null once the OffLoop is gone
  size_t unfinished = 0;
};

void OffLoop::Work(const std::shared_ptr<Shared>& shared) {
  std::unique_lock<std::mutex> lock(shared->mutex);
  while (true) {
    shared->wake.wait(lock, [&] { return shared->io == nullptr || !shared->jobs.empty(); });
    if (shared->io == nullptr) return;
    auto job = std::move(shared->jobs.front());
    shared->jobs.pop_front();
    lock.unlock();
    // The job's work is done once it hands its result over: it stops counting as pending in
    // the same locked step, so a `done` that runs on the loop never sees its own job pending.
    // Posting holds the mutex, so that the destructor cannot clear `io` in between.
    bool handed = false;
    job([&shared, &handed](std::function<void()> handler) {
      std::lock_guard<std::mutex> guard(shared->mutex);
      if (!handed) --shared->unfinished;
      handed = true;
      if (shared->io != nullptr) boost::asio::post(*shared->io, std::move(handler));
    });
    lock.lock();
    if (!handed) --shared->unfinished;
  }
}

OffLoop::OffLoop(boost::asio::io_context& io) : shared_(std::make_shared<Shared>()) {
  shared_->io = &io;
  std::thread([shared = shared_] { Work(shared); }).detach();
}

OffLoop::~OffLoop() {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  shared_->io = nullptr;
  shared_->jobs.clear();
  shared_->wake.notify_all();
}

void OffLoop::Queue(std::function<void(const Poster&)> job) {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  shared_->jobs.push_back(std::move(job));
  ++shared_->unfinished;
  shared_->wake.notify_all();
}

size_t OffLoop::pending() const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  return shared_->unfinished;
}

}  // namespace gculaunch::sys
