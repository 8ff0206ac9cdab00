// The pod's termination message: a file the platform reads after the container exited
// (Kubernetes shows it in `kubectl describe pod` and the pod's status).
//
// Kubernetes bind-mounts the file into the container (terminationMessagePath, default
// /dev/termination-log), so it cannot be replaced by a rename: it is opened as it is, without
// following a symbolic link (O_NOFOLLOW: a link planted at the path is refused, never written
// through), must be a regular file, and is truncated and written in place.  The kubelet keeps
// 4096 bytes per container and 12 KiB for the whole pod (exit_summary.h cuts the text).
//
// Thread safety: functions without shared state.
#pragma once

#include <string>

#include "base/error.h"

namespace gculaunch::sys {

inline constexpr const char* kDefaultTerminationLog = "/dev/termination-log";

/// The file --termination-log names: `given` when set ("none": none), else
/// kDefaultTerminationLog when it exists as a regular file (not a link) this process may
/// write; empty: no termination message.
std::string ChooseTerminationLog(const std::string& given);

/// Replaces the contents of the existing regular file `path` with `text`.  Refuses a
/// symbolic link, a missing file, a directory, a FIFO or a device; errors name the path and
/// the fix.
Status WriteTerminationLog(const std::string& path, const std::string& text);

}  // namespace gculaunch::sys
