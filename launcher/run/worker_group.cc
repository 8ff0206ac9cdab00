#include "launcher/run/worker_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <map>
#include <set>

#include "launcher/sys/safe_files.h"

namespace gculaunch {

double UnixNow() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::int64_t UnixNowNs() {
  using namespace std::chrono;
  return duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count();
}

namespace {

// A rank's log file in the run's log directory, opened through its descriptor (never by a
// path another user could redirect); none without one.
Result<TargetPtr> OpenLogFile(const RankLaunch& launch, const std::string& rel) {
  if (rel.empty() || !launch.log_dir) return TargetPtr();
  auto fd = launch.log_dir->OpenFile(rel, O_WRONLY | O_CREAT | O_TRUNC);
  if (!fd.ok()) return Error{fd.error().what, "check that the --log-dir directory is writable"};
  return OutputTarget::Owned(std::move(*fd), launch.log_dir->PathOf(rel));
}

// The attempt's --duplicate-*-filters files, shared by its ranks: opened (created empty)
// once, at the first rank that names one.
class FilteredFiles {
 public:
  Result<TargetPtr> For(const RankLaunch& launch, const std::string& rel) {
    if (rel.empty()) return TargetPtr();
    auto& target = open_[rel];
    if (!target) {
      auto opened = OpenLogFile(launch, rel);
      if (!opened.ok()) return opened.error();
      target = *opened;
    }
    return target;
  }

 private:
  std::map<std::string, TargetPtr> open_;
};

}  // namespace

struct WorkerGroup::Rank {
  RankRecord record;
  bool exited = false;       ///< the exit was reported (the leader may still be a zombie)
  bool group_empty = false;  ///< known empty: the leader was released, never signal again
  LineTail tail;
  std::string stack_file;  ///< --stack-dumps: the hook's file
  int stack_signal = 0;
  std::string heartbeat_file;           ///< --hang-timeout
  std::optional<sys::HeldDir> log_dir;  ///< where error_file_copy goes
  std::string error_file_copy;
  std::chrono::steady_clock::time_point started;
  /// When output last arrived on either stream; epoch (zero): never.
  std::shared_ptr<std::chrono::steady_clock::time_point> activity =
      std::make_shared<std::chrono::steady_clock::time_point>();
  std::shared_ptr<RankStream> out;
  std::shared_ptr<RankStream> err;
};

WorkerGroup::WorkerGroup(WorkerGroupDeps deps, int restart_count, ExitCallback on_exit,
                         std::function<void()> on_output_closed)
    : deps_(std::move(deps)),
      restart_count_(restart_count),
      on_exit_(std::move(on_exit)),
      on_output_closed_(std::move(on_output_closed)),
      group_timer_(deps_.io) {}

WorkerGroup::~WorkerGroup() {
  // Closing the streams below must not call back into a group being destroyed.
  lifetime_.Expire();
  for (auto& rank : ranks_) {
    if (rank->out) rank->out->Close();
    if (rank->err) rank->err->Close();
  }
}

Status WorkerGroup::Start(const std::vector<RankLaunch>& launches, int* failed_local_rank) {
  auto devnull = sys::OpenCloexec("/dev/null", O_RDONLY);
  if (!devnull.ok()) return devnull.error();
  FilteredFiles filtered_files;

  for (const RankLaunch& launch : launches) {
    auto rank = std::make_unique<Rank>();
    rank->record.restart_count = restart_count_;
    rank->record.local_rank = launch.local_rank;
    rank->record.rank = launch.rank;
    rank->record.error_file = launch.error_file;
    rank->stack_file = launch.stack_file;
    rank->stack_signal = launch.stack_signal;
    rank->heartbeat_file = launch.heartbeat_file;
    rank->log_dir = launch.log_dir;
    rank->error_file_copy = launch.error_file_copy;
    // A heartbeat file left from an earlier run of the same directory is not progress.
    if (!launch.heartbeat_file.empty()) ::unlink(launch.heartbeat_file.c_str());
    Rank& r = *rank;
    ranks_.push_back(std::move(rank));

    auto fail = [&](Error error) -> Status {
      if (failed_local_rank != nullptr) *failed_local_rank = launch.local_rank;
      return error;
    };
    auto out_log = OpenLogFile(launch, launch.stdout_log);
    if (!out_log.ok()) return fail(out_log.error());
    auto err_log = OpenLogFile(launch, launch.stderr_log);
    if (!err_log.ok()) return fail(err_log.error());
    auto out_filtered = filtered_files.For(launch, launch.filtered_stdout_log);
    if (!out_filtered.ok()) return fail(out_filtered.error());
    auto err_filtered = filtered_files.For(launch, launch.filtered_stderr_log);
    if (!err_filtered.ok()) return fail(err_filtered.error());

    auto streams = Begin(r, launch, devnull->get());
    if (!streams.ok()) return fail(streams.error());
    auto& [out_read, err_read] = *streams;
    r.record.start_time = UnixNow();
    r.started = std::chrono::steady_clock::now();

    const std::string prefix = launch.console_prefix.empty()
                                   ? "[rank" + std::to_string(launch.rank) + "]: "
                                   : launch.console_prefix;
    auto on_closed = lifetime_.Wrap([this] {
      --open_streams_;
      if (open_streams_ == 0 && on_output_closed_) on_output_closed_();
    });
    open_streams_ += 2;
    StreamRoute out_route{launch.stdout_to_console ? deps_.console_out : nullptr,
                          prefix,
                          *out_log,
                          nullptr,
                          deps_.idle_flush,
                          LineSplitter::kDefaultMaxLine,
                          deps_.progress_interval,
                          r.activity};
    StreamRoute err_route = out_route;
    err_route.console = launch.stderr_to_console ? deps_.console_err : nullptr;
    err_route.log_file = *err_log;
    err_route.tail = &r.tail;
    if (!launch.stdout_filters.empty()) {
      out_route.filtered = *out_filtered;
      out_route.filters = launch.stdout_filters;
    }
    if (!launch.stderr_filters.empty()) {
      err_route.filtered = *err_filtered;
      err_route.filters = launch.stderr_filters;
    }
    r.out = RankStream::Start(deps_.io, std::move(out_read), std::move(out_route), deps_.writer,
                              deps_.flow, on_closed);
    r.err = RankStream::Start(deps_.io, std::move(err_read), std::move(err_route), deps_.writer,
                              deps_.flow, on_closed);
  }
  return OkStatus();
}

// The rank's process: its standby (--warm-ranks) when one can serve, else a new one.  Returns
// the read ends of its stdout and stderr.
Result<std::pair<sys::UniqueFd, sys::UniqueFd>> WorkerGroup::Begin(Rank& r,
                                                                   const RankLaunch& launch,
                                                                   int devnull) {
  auto on_exit = lifetime_.Wrap([this, &r](pid_t, WorkerExit exit) { OnExited(r, exit); });
  std::optional<AdoptedStandby> standby;
  if (deps_.standbys != nullptr) standby = deps_.standbys->Take(launch);
  if (standby) {
    // A warm rank: the standby got the attempt's environment and is running the script.
    r.record.pid = standby->pid;
    r.record.warm = true;
    *standby->on_exit = std::move(on_exit);
    return std::pair{std::move(standby->out), std::move(standby->err)};
  }
  auto out_pipe = sys::MakePipe("rank stdout");
  if (!out_pipe.ok()) return out_pipe.error();
  auto err_pipe = sys::MakePipe("rank stderr");
  if (!err_pipe.ok()) return err_pipe.error();
  sys::SpawnRequest request;
  request.program = launch.program;
  request.argv = launch.argv;
  request.env = launch.env;
  request.stdin_fd = launch.inherit_stdin ? -1 : devnull;
  request.stdout_fd = out_pipe->write.get();
  request.stderr_fd = err_pipe->write.get();
  request.take_terminal = launch.take_terminal;
  request.cpus = launch.cpus;
  auto pid = deps_.spawner.Spawn(request);
  if (!pid.ok()) return pid.error();
  // Our copies of the write ends must go, or the streams never see EOF.
  out_pipe->write.Reset();
  err_pipe->write.Reset();
  r.record.pid = *pid;
  if (deps_.guardian != nullptr) deps_.guardian->GroupStarted(*pid, sys::ProcessStartTime(*pid));
  deps_.watcher.Watch(*pid, std::move(on_exit));
  return std::pair{std::move(out_pipe->read), std::move(err_pipe->read)};
}

void WorkerGroup::OnExited(Rank& rank, WorkerExit exit) {
  rank.exited = true;
  rank.record.exit = exit;
  rank.record.exit_time = UnixNow();
  CopyErrorFile(rank);
  // While the attempt runs, the group is looked at shortly (ranks that exit together share
  // one look at /proc).  In a teardown the Supervisor's drain check looks once every rank
  // has exited, and then every drain_poll: one scan instead of one per rank.
  if (!stopping_) ScheduleGroupCheck(kExitCheckDelay);
  if (on_exit_) on_exit_(rank.record.local_rank, exit);
}

// The rank wrote its error file in gculaunch's private directory (it opens it by name).  It
// is read here, once, with sys::ReadRankFile's rules (never through a link, never a FIFO or
// a device, only the job's user's, at most 1 MiB): the record keeps the text for the exit
// summary, --summary-json and the parent's error file, and the log directory gets a copy
// (torchrun's layout), written through the directory's descriptor.  Anything else is one
// warning naming the file and why; the summary then shows the rank's stderr.
void WorkerGroup::CopyErrorFile(Rank& rank) {
  if (rank.record.error_file.empty()) return;
  sys::RankFileRules rules;
  rules.owner = ::geteuid();
  auto read = sys::ReadRankFile(rank.record.error_file, rules);
  std::string refused;
  if (!read.ok()) {
    refused = read.error().what;
  } else if (read->cut) {
    refused = "'" + rank.record.error_file + "' is larger than 1 MiB, the most gculaunch reads " +
              "of an error file (it read no further)";
  }
  if (!refused.empty()) {
    deps_.writer.Urgent(deps_.console_err,
                        "gculaunch: warning: rank " + std::to_string(rank.record.rank) +
                            "'s error file is not used: " + refused +
                            "; the exit summary shows the rank's stderr instead\n");
    return;
  }
  if (!read->found) return;  // none written (a clean exit, or no @record)
  rank.record.error_text = std::make_shared<const std::string>(std::move(read->text));
  rank.record.error_file_mtime_ns = read->mtime_ns;
  if (rank.error_file_copy.empty() || !rank.log_dir) return;
  if (Status copied = rank.log_dir->WriteFile(rank.error_file_copy, *rank.record.error_text);
      !copied.ok()) {
    deps_.writer.Urgent(deps_.console_err, "gculaunch: warning: " + copied.error().what + "\n");
    return;
  }
  rank.record.error_file_shown = rank.log_dir->PathOf(rank.error_file_copy);
}

void WorkerGroup::ScheduleGroupCheck(std::chrono::milliseconds after) {
  if (group_check_pending_) return;
  group_check_pending_ = true;
  group_timer_.expires_after(after);
  group_timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
    group_check_pending_ = false;
    if (ec) return;
    if (!CheckGroupsEmpty()) {
      for (const auto& rank : ranks_) {
        if (rank->exited && !rank->group_empty) {
          ScheduleGroupCheck(deps_.group_poll);
          break;
        }
      }
    }
  }));
}

void WorkerGroup::MarkGroupEmpty(Rank& rank) {
  if (rank.group_empty) return;
  rank.group_empty = true;
  deps_.watcher.Release(rank.record.pid);  // the number is free from now on
  if (deps_.guardian != nullptr) deps_.guardian->GroupGone(rank.record.pid);
}

int WorkerGroup::SignalAll(int sig) {
  int signalled = 0;
  for (auto& rank : ranks_) {
    // An exited leader is still our zombie until its group is empty: the number is ours.
    if (rank->record.pid <= 0 || rank->group_empty) continue;
    if (sys::SignalGroup(rank->record.pid, sig)) ++signalled;
  }
  return signalled;
}

bool WorkerGroup::AllExited() const {
  for (const auto& rank : ranks_) {
    if (rank->record.pid > 0 && !rank->exited) return false;
  }
  return true;
}

bool WorkerGroup::CheckGroupsEmpty() {
  bool all = true;
  std::set<pid_t> asked;
  for (const auto& rank : ranks_) {
    if (rank->record.pid <= 0 || rank->group_empty) continue;
    if (rank->exited) {
      asked.insert(rank->record.pid);
    } else {
      all = false;
    }
  }
  if (asked.empty()) return all;
  auto live = sys::LiveGroups(asked);
  if (!live.ok()) {
    scan_error_ = live.error().what;
    return false;  // cannot look: nothing is known to be empty
  }
  scan_error_.clear();
  for (auto& rank : ranks_) {
    if (asked.count(rank->record.pid) == 0) continue;
    if (live->count(rank->record.pid) != 0) {
      all = false;
    } else {
      MarkGroupEmpty(*rank);
    }
  }
  return all;
}

bool WorkerGroup::OutputClosed() const { return open_streams_ == 0; }

void WorkerGroup::CloseOutput() {
  for (auto& rank : ranks_) {
    if (rank->out) rank->out->Close();
    if (rank->err) rank->err->Close();
  }
}

std::vector<sys::ProcInfo> WorkerGroup::Survivors() const {
  std::vector<sys::ProcInfo> survivors;
  for (const auto& rank : ranks_) {
    if (rank->record.pid <= 0 || rank->group_empty) continue;
    bool leader_listed = false;
    for (sys::ProcInfo& info : sys::GroupMembers(rank->record.pid)) {
      if (info.state == 'Z') continue;  // an exited leader waiting for its group to empty
      if (info.pid == rank->record.pid) leader_listed = true;
      survivors.push_back(std::move(info));
    }
    if (!rank->exited && !leader_listed) {
      sys::ProcInfo info;
      if (!sys::ReadProcInfo(rank->record.pid, &info)) {
        info.pid = rank->record.pid;
        info.pgid = rank->record.pid;
      }
      survivors.push_back(info);
    }
  }
  return survivors;
}

std::vector<RankRecord> WorkerGroup::Records() const {
  std::vector<RankRecord> records;
  records.reserve(ranks_.size());
  for (const auto& rank : ranks_) {
    RankRecord record = rank->record;
    record.stderr_tail = rank->tail.lines();
    records.push_back(std::move(record));
  }
  return records;
}

std::vector<StackTarget> WorkerGroup::StackTargets() const {
  std::vector<StackTarget> targets;
  targets.reserve(ranks_.size());
  for (const auto& rank : ranks_) {
    StackTarget t;
    t.local_rank = rank->record.local_rank;
    t.rank = rank->record.rank;
    t.file = rank->stack_file;
    t.signal = rank->stack_signal;
    // Only a running child is ever signalled: an exited one has no stack to show.
    if (rank->record.pid <= 0) {
      t.not_running = "not started";
    } else if (rank->exited) {
      t.not_running = rank->record.exit ? rank->record.exit->Describe() : "exited";
    } else {
      t.pid = rank->record.pid;
    }
    targets.push_back(std::move(t));
  }
  return targets;
}

std::vector<RankProgress> WorkerGroup::Progress() const {
  const auto now = std::chrono::steady_clock::now();
  const std::int64_t now_ns = UnixNowNs();
  std::vector<RankProgress> progress;
  for (const auto& rank : ranks_) {
    if (rank->record.pid <= 0) continue;
    RankProgress p;
    p.local_rank = rank->record.local_rank;
    p.rank = rank->record.rank;
    p.running = !rank->exited;
    p.since_start_s = std::chrono::duration<double>(now - rank->started).count();
    if (*rank->activity != std::chrono::steady_clock::time_point{}) {
      p.output_age_s = std::chrono::duration<double>(now - *rank->activity).count();
    }
    // lstat, the job's user's regular file only: a link (to a file someone else keeps
    // fresh, or on a mount that hangs) is no heartbeat.
    const auto beat = rank->heartbeat_file.empty()
                          ? std::nullopt
                          : sys::StatRankFile(rank->heartbeat_file, ::geteuid());
    if (beat) {
      p.heartbeat_age_s = std::max(0.0, static_cast<double>(now_ns - beat->mtime_ns) / 1e9);
    }
    progress.push_back(p);
  }
  return progress;
}

void WorkerGroup::NoteStopSignal() {
  stopping_ = true;
  const std::int64_t now = UnixNowNs();
  for (auto& rank : ranks_) {
    if (rank->record.stop_signal_ns == 0) rank->record.stop_signal_ns = now;
  }
}

void WorkerGroup::MarkExitedWhileRunning(int local_rank) {
  for (auto& rank : ranks_) {
    if (rank->record.local_rank == local_rank) rank->record.exited_while_running = true;
  }
}

}  // namespace gculaunch
