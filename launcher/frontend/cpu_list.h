// CPU lists in the kernel's text form ("0-3,8,10-11"), as found in sysfs
// (cpulist, online, thread_siblings_list) and in /proc/<pid>/status
// (Cpus_allowed_list).  gculaunch prints its own lists the same way
// (GCULAUNCH_CPUS, the dry run).
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gculaunch {

/// Parses "0-3,8,10-11" (surrounding whitespace and a trailing newline are
/// allowed; an empty text is the empty list) into sorted, unique CPU numbers.
/// nullopt for anything else ("3-1", "a", "1,,2").
std::optional<std::vector<int>> ParseCpuList(std::string_view text);

/// The shortest kernel-style text for `cpus` (any order, duplicates allowed):
/// {0,1,2,3,8} -> "0-3,8".  Empty list -> "".
std::string FormatCpuList(std::vector<int> cpus);

}  // namespace gculaunch
