#include "launcher/run/logging.h"

#include <unistd.h>

#include <cerrno>

namespace gculaunch {

std::string FormatLogLine(spdlog::level::level_enum level, std::string_view text) {
  std::string line = "gculaunch: ";
  switch (level) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      line += "debug: ";
      break;
    case spdlog::level::warn:
      line += "warning: ";
      break;
    case spdlog::level::err:
    case spdlog::level::critical:
      line += "error: ";
      break;
    default:
      break;
  }
  line.append(text);
  line += '\n';
  return line;
}

namespace {

void WriteStderr(std::string_view text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace

void PrintError(const Error& error) { WriteStderr(error.Format() + "\n"); }

void LogSink::Attach(OutputWriter* writer, TargetPtr target) {
  std::lock_guard<std::mutex> lock(mutex_);
  writer_ = writer;
  target_ = std::move(target);
}

void LogSink::Detach() {
  std::lock_guard<std::mutex> lock(mutex_);
  writer_ = nullptr;
  target_.reset();
}

void LogSink::sink_it_(const spdlog::details::log_msg& msg) {
  std::string line =
      FormatLogLine(msg.level, std::string_view(msg.payload.data(), msg.payload.size()));
  if (writer_ != nullptr) {
    writer_->Urgent(target_, std::move(line));
    return;
  }
  WriteStderr(line);
}

std::shared_ptr<spdlog::logger> MakeLogger(std::shared_ptr<LogSink> sink,
                                           const std::string& level) {
  auto logger = std::make_shared<spdlog::logger>("gculaunch", std::move(sink));
  if (level == "debug") {
    logger->set_level(spdlog::level::debug);
  } else if (level == "warning" || level == "warn") {
    logger->set_level(spdlog::level::warn);
  } else if (level == "error") {
    logger->set_level(spdlog::level::err);
  } else {
    logger->set_level(spdlog::level::info);
  }
  return logger;
}

}  // namespace gculaunch
