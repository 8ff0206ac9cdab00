// gculaunch's own log messages: one spdlog logger (created by LauncherMain
// and passed by reference everywhere; never looked up by name) writing
// through a LogSink.
//
// Format, one line each:  "gculaunch: <message>" (info),
//   "gculaunch: warning: <message>", "gculaunch: error: <message>",
//   "gculaunch: debug: <message>".
//
// Before a launch starts (and after it ends) the sink writes to stderr
// directly; while the launch runs it is attached to the OutputWriter, so
// messages are ordered with the ranks' output and a slow terminal never
// blocks the event loop.
//
// Thread safety: the sink serializes with its own mutex (spdlog base_sink);
// Attach/Detach from the main thread.
#pragma once

#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>

#include <memory>
#include <mutex>
#include <string>

#include "base/error.h"
#include "launcher/run/output_writer.h"

namespace gculaunch {

class LogSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  /// From now on messages go through `writer` to `target`.
  void Attach(OutputWriter* writer, TargetPtr target);
  /// Back to direct writes on stderr.
  void Detach();

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override;
  void flush_() override {}

 private:
  OutputWriter* writer_ = nullptr;  // GUARDED_BY(mutex_)
  TargetPtr target_;                // GUARDED_BY(mutex_)
};

/// "gculaunch: warning: text\n" and so on.
std::string FormatLogLine(spdlog::level::level_enum level, std::string_view text);

/// Writes Error::Format() and a newline straight to stderr: the one-line form
/// of usage and start-up errors ("gculaunch: <what> (fix: <hint>)").
void PrintError(const Error& error);

/// The logger gculaunch uses; `level` is "debug", "info" (default), "warning" or "error".
std::shared_ptr<spdlog::logger> MakeLogger(std::shared_ptr<LogSink> sink, const std::string& level);

}  // namespace gculaunch
