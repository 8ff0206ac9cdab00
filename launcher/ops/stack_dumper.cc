#include "launcher/ops/stack_dumper.h"

#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>

#include "launcher/sys/proc_signals.h"
#include "launcher/sys/process_group.h"
#include "launcher/sys/safe_files.h"

namespace gculaunch {
namespace {

// What the rank appended between `offset` and `end`: through sys::ReadRankFile's rules (no
// link, no FIFO, the job's user's file only), at most kMaxDumpBytes.
std::string ReadDump(const std::string& path, long long offset, long long end) {
  if (end <= offset) return "";
  sys::RankFileRules rules;
  rules.owner = ::geteuid();
  rules.offset = static_cast<off_t>(offset);
  rules.limit = std::min(static_cast<size_t>(end - offset), kMaxDumpBytes);
  auto read = sys::ReadRankFile(path, rules);
  if (!read.ok() || !read->found) return "";
  if (static_cast<size_t>(end - offset) > kMaxDumpBytes) {
    read->text +=
        "\n[gculaunch: the dump is cut at " + std::to_string(kMaxDumpBytes >> 20) + " MiB]\n";
  }
  return std::move(read->text);
}

}  // namespace

long long FileSize(const std::string& path) {
  const auto st = sys::StatRankFile(path, ::geteuid());
  return st ? static_cast<long long>(st->size) : -1;
}

StackDumper::StackDumper(boost::asio::io_context& io, Options options)
    : io_(io), options_(options), timer_(io) {}

void StackDumper::Dump(std::vector<StackTarget> targets, Done done) {
  queue_.push_back(Request{std::move(targets), std::move(done)});
  if (!busy_) StartNext();
}

void StackDumper::StartNext() {
  if (queue_.empty()) return;
  busy_ = true;
  Request request = std::move(queue_.front());
  queue_.pop_front();
  current_.clear();
  current_done_ = std::move(request.done);
  started_ = std::chrono::steady_clock::now();
  for (const StackTarget& t : request.targets) {
    Pending p;
    p.dump.local_rank = t.local_rank;
    p.dump.rank = t.rank;
    p.dump.pid = t.pid;
    p.file = t.file;
    const std::string sig = std::to_string(t.signal);
    if (t.pid <= 0) {
      p.dump.why = "not running" + (t.not_running.empty() ? "" : " (" + t.not_running + ")");
    } else if (t.file.empty()) {
      p.dump.why = "started without the stack-dump hook (run with --stack-dumps)";
    } else if (auto catches = sys::CatchesSignal(t.pid, t.signal); !catches.ok()) {
      p.dump.why = catches.error().what;
    } else if (!*catches) {
      p.dump.why = "the hook is not loaded: pid " + std::to_string(t.pid) +
                   " does not catch signal " + sig +
                   " (not a Python rank started by gculaunch, python -S or -I, a wrapper that "
                   "does not exec Python, or still starting up); not signalled";
    } else if ((p.start_size = FileSize(t.file)) < 0) {
      p.dump.why = "the hook's file " + t.file +
                   " is missing or not a regular file of the job's user; not signalled";
    } else if (!sys::SignalProcess(t.pid, t.signal)) {
      p.dump.why = "pid " + std::to_string(t.pid) + " has exited";
    } else {
      p.last_size = p.start_size;
      p.last_change = started_;
      p.waiting = true;
    }
    current_.push_back(std::move(p));
  }
  Poll();
}

void StackDumper::Poll() {
  const auto now = std::chrono::steady_clock::now();
  const bool out_of_time = now - started_ >= options_.bound;
  bool waiting = false;
  for (Pending& p : current_) {
    if (!p.waiting) continue;
    const long long size = FileSize(p.file);
    if (size > p.last_size) {
      p.last_size = size;
      p.last_change = now;
    }
    const bool grew = p.last_size > p.start_size;
    if ((grew && now - p.last_change >= options_.quiet) || out_of_time) {
      p.waiting = false;
      if (grew) {
        p.dump.ok = true;
        p.dump.text = ReadDump(p.file, p.start_size, p.last_size);
      } else {
        p.dump.why = "no dump within " + std::to_string(options_.bound.count()) +
                     " ms of the signal (the process may be stopped, or in uninterruptible "
                     "sleep)";
      }
    } else {
      waiting = true;
    }
  }
  if (!waiting) {
    // Posted: the callback may ask for another dump, which must not start inside this one.
    boost::asio::post(io_, lifetime_.Wrap([this] { Finish(); }));
    return;
  }
  timer_.expires_after(options_.poll);
  timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
    if (!ec) Poll();
  }));
}

void StackDumper::Finish() {
  std::vector<StackDump> dumps;
  dumps.reserve(current_.size());
  for (Pending& p : current_) dumps.push_back(std::move(p.dump));
  current_.clear();
  Done done = std::move(current_done_);
  busy_ = false;
  if (done) done(std::move(dumps));
  if (!busy_) StartNext();  // unless `done` asked for another dump, which started it
}

}  // namespace gculaunch
