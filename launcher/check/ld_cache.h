// ParseLdCache: the dynamic linker's cache file (/etc/ld.so.cache) as a list
// of (library name, path) pairs: what `ldconfig -p` prints, without running
// ldconfig.  The preflight check reads the file through a DeviceProbe, so
// tests hand it a cache of their own below --sysroot.
//
// Formats understood (glibc elf/dl-cache.h):
//   * new   "glibc-ld.so.cache1.1" header, 24-byte entries; strings are
//           offsets from the start of that header (glibc >= 2.32 writes only this);
//   * old   "ld.so-1.7.0" header, 12-byte entries, strings after the entries;
//   * compat  an old cache followed (8-byte aligned) by a new one, as glibc
//           2.31 (Debian bullseye, Ubuntu 20.04) and older write by default;
//           the new part is used.
// Bytes are read in the host's order (the cache is a host file).
//
// Thread safety: pure function.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace gculaunch {

struct LdCacheEntry {
  std::string name;   ///< the soname-level file name, e.g. "libeccl.so.1"
  std::string path;   ///< where it is, e.g. "/usr/lib/libeccl.so.1"
  int32_t flags = 0;  ///< glibc's FLAG_* bits (ELF class / architecture)

  /// Whether the entry is for this build's architecture (x86-64 libraries on
  /// an x86-64 build).  Other builds accept every ELF entry.
  bool MatchesHost() const;
};

/// The entries of a cache file's bytes, in file order.  The error says what
/// is wrong with the bytes ("not an ld.so.cache file", "truncated").
Result<std::vector<LdCacheEntry>> ParseLdCache(std::string_view bytes);

}  // namespace gculaunch
