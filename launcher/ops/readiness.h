// Readiness: whether this node's part of the job is ready, as a pure function, for /readyz
// (metrics_http.h) and `gculaunch status` (status_view.h).  docs/operations.md, "Probes".
//
//   AssessReadiness(job snapshot, how init is known, what the store shows) -> {ready, reason}
//
// Ready means: this node's rendezvous is complete (its ranks of the current epoch were
// started: a node starts them only once the job's plan arrived), every local rank of that
// epoch runs, and every rank has passed init_process_group.  Anything else is "not ready"
// with a one-line reason: the ranks are starting, one exited (a restart or the end follows),
// a restart backs off, the job is over.
//
// "Passed init_process_group" is read from the ranks' store where this node hosts it (the
// agent store): InitMark looks for the keys torch writes there once every rank is through
// (docs/operations.md lists them per torch version).  Where gculaunch cannot see them (the
// store is on another node or is rank 0's, --no-python, whose program need not be torch),
// ready means that every local rank runs, and the reason says so.
//
// Thread safety: pure functions over values.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "launcher/ops/status_model.h"

namespace gculaunch {

/// A key of the ranks' store in the current attempt's key space: its value, or null.
using StoreLookup = std::function<const std::string*(std::string_view key)>;

/// Which of torch's marks of a passed init_process_group the store shows for the attempt whose
/// ranks have TORCHELASTIC_RESTART_COUNT `restart_count` and WORLD_SIZE `world_size`: a short
/// description ("the store barrier of torch 1.13"), or nullopt while none is complete.
std::optional<std::string> InitMark(const StoreLookup& find, int restart_count, int world_size);

struct ReadinessInput {
  const JobSnapshot* job = nullptr;  ///< required
  double now = 0;                    ///< unix seconds
  bool multinode = false;            ///< before the first epoch: waiting for the nodes
  /// Why init_process_group cannot be seen here ("the ranks' store is on node 0"); empty:
  /// this node sees the store, and `init_mark` says what it shows.
  std::string init_unknown;
  std::optional<std::string> init_mark;
};

struct Readiness {
  bool ready = false;
  std::string reason;  ///< one line, without "ready:" / "not ready:"
  /// "ready: ..." or "not ready: ...", the /readyz body's line.
  std::string Line() const;
};

Readiness AssessReadiness(const ReadinessInput& in);

}  // namespace gculaunch
