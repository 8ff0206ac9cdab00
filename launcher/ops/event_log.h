// EventLog: the listener of JobEvents (launcher/run/job_events.h) that appends each event as one
// JSON line to "<run log dir>/events.jsonl" (docs/operations.md lists every event and field;
// schema kEventSchema).
//
// Ownership: EventLog owns its file.
// Thread safety: the io_context's thread only (the events come from the event loop).
#pragma once

#include <memory>
#include <string>

#include "base/error.h"
#include "launcher/run/job_events.h"
#include "launcher/sys/held_dir.h"

namespace gculaunch {

/// The JSON line of `event` (without the newline): schema, ts (unix seconds), time (ISO 8601,
/// UTC), event, run_id, node_rank, then the event's own fields.
std::string FormatEventLine(const JobEvent& event, double unix_time, const std::string& run_id,
                            int node_rank);

class EventLog : public JobEvents {
 public:
  /// Opens (creates, appends to) the file `name` in `dir` (the run's log directory, through
  /// its descriptor).  The error names the file and errno.
  static Result<std::unique_ptr<EventLog>> Open(const sys::HeldDir& dir, const std::string& name,
                                                std::string run_id, int node_rank);
  ~EventLog() override;
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  /// Writes the event's line with one write() (heartbeats are not written).  A failed write
  /// does not stop the job; it is counted in write_errors().
  void On(const JobEvent& event) override;
  int write_errors() const { return write_errors_; }
  const std::string& path() const { return path_; }

 private:
  EventLog(int fd, std::string path, std::string run_id, int node_rank);

  int fd_;
  std::string path_;
  std::string run_id_;
  int node_rank_;
  int write_errors_ = 0;
};

}  // namespace gculaunch
