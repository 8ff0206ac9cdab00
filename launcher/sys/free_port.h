// PickFreePort: a TCP port that is free right now, for MASTER_PORT when
// rank 0 hosts the store (torch 1.13 --standalone behaviour).
//
// The probe socket is close-on-exec and closed again before any rank starts,
// so there is a window in which another program may take the port; rank 0's
// failure summary then says so (exit_summary.h).  When gculaunch hosts the
// store itself, it keeps its bound socket instead and needs no probe.
//
// Thread safety: stateless.
#pragma once

#include "base/error.h"

namespace gculaunch::sys {

/// Binds port 0 on all addresses (IPv6 dual-stack when available, else IPv4)
/// and returns the port the kernel chose.
Result<int> PickFreePort();

}  // namespace gculaunch::sys
