// Which signals a process catches, read from /proc/<pid>/status.
//
// Before gculaunch sends a rank the stack-dump signal (a real-time signal, whose default
// action kills the process), it checks that the rank has a handler for it: the "SigCgt"
// line of /proc/<pid>/status, a hexadecimal mask whose bit (sig - 1) is set when the process
// catches signal `sig`.  A rank without gculaunch's hook (not Python, a wrapper that does
// not exec Python, python -S/-I, or a rank still starting up) is then reported, never
// signalled blind.
//
// The check and the kill are two steps: a process could change its handler in between.
// Only a rank that removes the hook's handler at exactly that moment could be killed; the
// hook never does.  The pid must be an unreaped child, so it cannot have been reused.
//
// Thread safety: stateless functions.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"

namespace gculaunch::sys {

/// The mask on the line "<field>:\t<hex>" of a /proc/<pid>/status text ("SigCgt", "SigBlk",
/// "SigIgn", ...).  nullopt when the line is missing or not hexadecimal.
std::optional<unsigned long long> ParseStatusMask(std::string_view status, std::string_view field);

/// Whether bit (sig - 1) of `mask` is set.  REQUIRES: 1 <= sig <= 64.
bool MaskHas(unsigned long long mask, int sig);

/// Whether process `pid` has a handler for `sig` now.  The error names the pid and why
/// /proc could not tell (the process is gone: ENOENT).
Result<bool> CatchesSignal(pid_t pid, int sig);

}  // namespace gculaunch::sys
