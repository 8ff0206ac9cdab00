#include "launcher/run/rank_output.h"

#include <fcntl.h>

#include <boost/asio/post.hpp>

namespace gculaunch {

namespace asio = boost::asio;

std::function<void()> OutputFlow::SpaceCallback() {
  // Called on the writer thread: it touches nothing of this flow, which may be gone by
  // then; the wrapped ResumeAll() runs on the io_context thread, where the guard is asked.
  return [&io = io_, resume = lifetime_.Wrap([this] { ResumeAll(); })] { asio::post(io, resume); };
}

void OutputFlow::ResumeAll() {
  std::vector<std::function<void()>> parked;
  parked.swap(parked_);
  for (auto& resume : parked) resume();
}

std::shared_ptr<RankStream> RankStream::Start(asio::io_context& io, sys::UniqueFd read_end,
                                              StreamRoute route, OutputWriter& writer,
                                              OutputFlow& flow, std::function<void()> on_closed) {
  // The read end is gculaunch's own pipe, so making it non-blocking is safe.
  (void)sys::SetNonBlocking(read_end.get(), true);
  auto stream = std::make_shared<RankStream>(io, read_end.Release(), std::move(route), writer, flow,
                                             std::move(on_closed));
  stream->Read();
  return stream;
}

RankStream::RankStream(asio::io_context& io, int fd, StreamRoute route, OutputWriter& writer,
                       OutputFlow& flow, std::function<void()> on_closed)
    : pipe_(io, fd),
      idle_timer_(io),
      progress_timer_(io),
      throttle_(route.progress_interval),
      route_(std::move(route)),
      writer_(writer),
      flow_(flow),
      on_closed_(std::move(on_closed)),
      splitter_(route_.max_line) {}

void RankStream::Read() {
  if (closed_ || reading_) return;
  reading_ = true;
  pipe_.async_read_some(asio::buffer(buffer_),
                        [self = shared_from_this()](const boost::system::error_code& ec, size_t n) {
                          self->OnRead(ec, n);
                        });
}

void RankStream::OnRead(const boost::system::error_code& ec, size_t n) {
  reading_ = false;
  if (closed_) return;
  if (n > 0 && route_.activity) *route_.activity = std::chrono::steady_clock::now();
  if (n > 0) Consume(buffer_.data(), n);
  if (ec) {  // EOF (every writer closed the pipe) or an error: the stream is over
    Close();
    return;
  }
  ArmTimers();
  if (writer_.congested()) {
    paused_ = true;
    flow_.Park([weak = weak_from_this()] {
      if (auto self = weak.lock()) self->Resume();
    });
    return;
  }
  Read();
}

// One line for the console and the tail.  A line that ends a progress bar is its final state.
void RankStream::EmitLine(std::string_view text, LineEnd end) {
  const std::string_view visible = VisibleText(text);
  if (route_.tail != nullptr) route_.tail->Add(visible);
  if (route_.filtered && !(end == LineEnd::kFlushed && visible.empty()) &&
      ContainsAnyOf(visible, route_.filters)) {
    filtered_batch_ += route_.prefix;
    filtered_batch_ += visible;
    if (end == LineEnd::kSplit) filtered_batch_ += kSplitMarker;
    filtered_batch_ += '\n';
  }
  const bool ends_bar = progress_open_;
  progress_open_ = false;
  if (!route_.console) return;
  // On a terminal the final state replaces the live bar; elsewhere it is shown unless it
  // is the state shown last.
  if (ends_bar && !live_progress() && !throttle_.Final(visible)) return;
  if (end == LineEnd::kFlushed && visible.empty()) return;
  console_batch_ += route_.prefix;
  console_batch_ += visible;
  if (end == LineEnd::kSplit) console_batch_ += kSplitMarker;
  console_batch_ += '\n';
}

void RankStream::Consume(const char* data, size_t n) {
  const std::string_view bytes(data, n);
  if (route_.log_file) writer_.Write(route_.log_file, std::string(bytes));
  console_batch_.clear();
  filtered_batch_.clear();
  splitter_.Feed(bytes, [this](std::string_view text, LineEnd end) { EmitLine(text, end); });
  WriteBatches();
  if (splitter_.partial_is_progress()) {
    progress_open_ = true;
    splitter_.CompactProgress();
    ShowProgress();
  }
}

// The bar's latest state: drawn live on a terminal, else as a line when the throttle allows.
void RankStream::ShowProgress() {
  if (!route_.console) return;
  const std::string_view state = VisibleText(splitter_.partial());
  if (live_progress()) {  // the writer redraws it in place
    writer_.WriteProgress(route_.console, route_.prefix + std::string(state), this);
    return;
  }
  if (throttle_.Offer(state, ProgressThrottle::Clock::now())) {
    writer_.Write(route_.console, route_.prefix + std::string(state) + "\n", this);
  }
}

void RankStream::ArmTimers() {
  if (!splitter_.has_partial()) return;
  if (progress_open_) {
    ArmProgressTimer();
    return;
  }
  idle_timer_.expires_after(route_.idle_flush);
  idle_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    if (ec) return;  // re-armed or closed
    auto self = weak.lock();
    if (!self || self->closed_ || self->paused_) return;  // Resume() re-arms
    if (self->progress_open_) return;
    self->FlushPartial();
  });
}

// A state the throttle held back is shown when its interval has passed.
void RankStream::ArmProgressTimer() {
  if (!route_.console || live_progress()) return;
  const auto due = throttle_.due();
  if (due == ProgressThrottle::Clock::time_point::max()) return;
  progress_timer_.expires_at(due);
  progress_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    if (ec) return;
    auto self = weak.lock();
    if (!self || self->closed_ || self->paused_ || !self->progress_open_) return;
    const std::string_view state = VisibleText(self->splitter_.partial());
    if (self->throttle_.TakeDue(state, ProgressThrottle::Clock::now())) {
      self->writer_.Write(self->route_.console, self->route_.prefix + std::string(state) + "\n",
                          self.get());
    }
  });
}

// The carried partial line as a line of its own (idle plain text, or a bar's final state).
void RankStream::FlushPartial() {
  console_batch_.clear();
  filtered_batch_.clear();
  splitter_.FlushPartial([this](std::string_view text, LineEnd end) { EmitLine(text, end); });
  WriteBatches();
}

// The whole lines EmitLine collected, one chunk per target.
void RankStream::WriteBatches() {
  if (!console_batch_.empty()) writer_.Write(route_.console, std::move(console_batch_), this);
  console_batch_ = std::string();
  if (!filtered_batch_.empty()) writer_.Write(route_.filtered, std::move(filtered_batch_), this);
  filtered_batch_ = std::string();
}

void RankStream::Resume() {
  if (closed_ || !paused_) return;
  paused_ = false;
  ArmTimers();
  Read();
}

void RankStream::Close() {
  if (closed_) return;
  closed_ = true;
  FlushPartial();
  boost::system::error_code ignored;
  idle_timer_.cancel();
  progress_timer_.cancel();
  pipe_.close(ignored);
  if (on_closed_) {
    auto callback = std::move(on_closed_);
    callback();
  }
}

}  // namespace gculaunch
