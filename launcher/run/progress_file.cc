#include "launcher/run/progress_file.h"

#include <unistd.h>

#include <boost/asio/post.hpp>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "base/text.h"
#include "launcher/sys/safe_files.h"

namespace gculaunch {

namespace asio = boost::asio;

// What the reading thread and the loop share: whether the loop still wants the answer.  The
// thread posts only under the lock and only while wanted, so once Abandon() has run (a timeout,
// a newer read, the destructor) nothing more reaches the io_context.
struct ProgressFile::Shared {
  std::mutex mutex;
  bool wanted = true;
};

std::optional<std::int64_t> ParseProgress(std::string_view text) {
  const std::string trimmed = Trim(text);
  const std::size_t end = trimmed.find_first_of(" \t\r\n\v\f");
  const std::optional<long long> n = ParseInteger(
      std::string_view(trimmed).substr(0, end == std::string::npos ? trimmed.size() : end));
  if (!n || *n < 0) return std::nullopt;
  return static_cast<std::int64_t>(*n);
}

namespace {

// On the reading thread: the file, read as a rank's file is.
ProgressReading ReadNow(const std::string& path) {
  sys::RankFileRules rules;
  rules.owner = ::geteuid();  // the job's user, as for the ranks' error files
  rules.limit = kMaxProgressFileBytes;
  auto read = sys::ReadRankFile(path, rules);
  if (!read.ok()) return {std::nullopt, read.error().what};
  if (!read->found) return {std::nullopt, "there is no file " + path};
  if (read->cut)
    return {std::nullopt,
            "'" + path + "' is larger than " + std::to_string(kMaxProgressFileBytes) + " bytes"};
  std::optional<std::int64_t> value = ParseProgress(read->text);
  if (!value) return {std::nullopt, path + " holds no whole number >= 0"};
  return {value, ""};
}

}  // namespace

ProgressFile::ProgressFile(asio::io_context& io, std::string path, std::chrono::milliseconds bound)
    : io_(io), path_(std::move(path)), bound_(bound), timer_(io) {}

ProgressFile::~ProgressFile() { Abandon(); }

void ProgressFile::Abandon() {
  if (!current_) return;
  std::lock_guard<std::mutex> lock(current_->mutex);
  current_->wanted = false;
  current_.reset();
}

void ProgressFile::Read(std::function<void(ProgressReading)> done) {
  Abandon();
  done_ = std::move(done);
  auto read = std::make_shared<Shared>();
  current_ = read;
  auto answer =
      lifetime_.Wrap([this, read](ProgressReading reading) { Answer(read, std::move(reading)); });
  timer_.expires_after(bound_);
  timer_.async_wait([answer, seconds = Seconds(bound_, -1)](const boost::system::error_code& ec) {
    if (!ec) answer(ProgressReading{std::nullopt, "no answer from the file within " + seconds});
  });
  try {
    std::thread([path = path_, read, answer, &io = io_] {
      ProgressReading reading = ReadNow(path);
      std::lock_guard<std::mutex> lock(read->mutex);
      if (read->wanted) asio::post(io, [answer, reading = std::move(reading)] { answer(reading); });
    }).detach();
  } catch (const std::system_error& e) {  // no thread to be had: no number this time
    asio::post(io_, [answer, what = std::string(e.what())] {
      answer(ProgressReading{std::nullopt, "cannot start a thread to read it: " + what});
    });
  }
}

// The first answer for the read under way wins (the file's, or the timeout's).
void ProgressFile::Answer(const std::shared_ptr<Shared>& read, ProgressReading reading) {
  if (read != current_) return;
  Abandon();
  timer_.cancel();
  auto done = std::move(done_);
  done_ = nullptr;
  if (done) done(std::move(reading));
}

}  // namespace gculaunch
