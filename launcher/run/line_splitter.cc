#include "launcher/run/line_splitter.h"

#include <algorithm>

namespace gculaunch {

void LineSplitter::Feed(std::string_view bytes, const Emit& emit) {
  while (!bytes.empty()) {
    const size_t nl = bytes.find('\n');
    std::string_view segment = bytes.substr(0, nl == std::string_view::npos ? bytes.size() : nl);
    // Cut max_line pieces while the line is known to be longer than max_line.
    // A carry of exactly max_line bytes waits: the next byte decides whether
    // it is a whole line or a piece.
    while (partial_.size() + segment.size() > max_line_) {
      const size_t room = max_line_ - partial_.size();
      if (partial_.empty()) {
        emit(segment.substr(0, room), LineEnd::kSplit);
      } else {
        partial_.append(segment.substr(0, room));
        emit(partial_, LineEnd::kSplit);
        partial_.clear();
      }
      segment.remove_prefix(room);
    }
    if (nl == std::string_view::npos) {
      partial_.append(segment);
      return;
    }
    if (partial_.empty()) {
      emit(segment, LineEnd::kNewline);
    } else {
      partial_.append(segment);
      emit(partial_, LineEnd::kNewline);
      partial_.clear();
    }
    bytes.remove_prefix(nl + 1);
  }
}

void LineSplitter::FlushPartial(const Emit& emit) {
  if (partial_.empty()) return;
  std::string text;
  text.swap(partial_);
  emit(text, LineEnd::kFlushed);
}

void LineSplitter::CompactProgress() {
  const size_t last = partial_.rfind('\r');
  if (last == std::string::npos) return;
  // "...\rA\rB" keeps "\rB"; "...\rA\r" keeps "\rA\r" (a trailing '\r' may be a CRLF's).
  size_t from = last;
  if (last + 1 == partial_.size()) {
    if (last == 0) return;
    const size_t before = partial_.rfind('\r', last - 1);
    if (before == std::string::npos) return;
    from = before;
  }
  if (from > 0) partial_.erase(0, from);
}

bool ProgressThrottle::Offer(std::string_view state, Clock::time_point now) {
  if (state == shown_) {
    pending_ = false;  // nothing new to show
    return false;
  }
  if (now >= next_) {
    Shown(state, now);
    return true;
  }
  pending_ = true;
  return false;
}

bool ProgressThrottle::TakeDue(std::string_view state, Clock::time_point now) {
  if (!pending_ || now < next_) return false;
  if (state == shown_) {
    pending_ = false;
    return false;
  }
  Shown(state, now);
  return true;
}

bool ProgressThrottle::Final(std::string_view state) {
  const bool show = state != shown_;
  pending_ = false;
  shown_.clear();
  return show;
}

void ProgressThrottle::Shown(std::string_view state, Clock::time_point now) {
  shown_.assign(state);
  pending_ = false;
  next_ = now + interval_;
}

bool ContainsAnyOf(std::string_view line, const std::vector<std::string>& filters) {
  return std::any_of(filters.begin(), filters.end(), [line](const std::string& filter) {
    return line.find(filter) != std::string_view::npos;
  });
}

std::string_view VisibleText(std::string_view text) {
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  const size_t cr = text.rfind('\r');
  if (cr != std::string_view::npos) text.remove_prefix(cr + 1);
  return text;
}

void LineTail::Add(std::string_view line) {
  if (max_lines_ == 0) return;
  std::string text(line.substr(0, max_line_bytes_));
  if (ring_.size() < max_lines_) {
    ring_.push_back(std::move(text));
  } else {
    ring_[next_] = std::move(text);
    next_ = (next_ + 1) % max_lines_;
  }
}

std::vector<std::string> LineTail::lines() const {
  std::vector<std::string> out;
  out.reserve(ring_.size());
  for (size_t i = 0; i < ring_.size(); ++i) out.push_back(ring_[(next_ + i) % ring_.size()]);
  return out;
}

std::vector<SplitLine> SplitAllForTest(const std::vector<std::string>& chunks, size_t max_line) {
  std::vector<SplitLine> out;
  LineSplitter splitter(max_line);
  auto emit = [&](std::string_view text, LineEnd end) { out.push_back({std::string(text), end}); };
  for (const std::string& chunk : chunks) splitter.Feed(chunk, emit);
  splitter.FlushPartial(emit);
  return out;
}

}  // namespace gculaunch
