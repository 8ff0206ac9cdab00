// Writes ld.so.cache files in glibc's formats (elf/dl-cache.h, laid out by
// hand) for tests that need a dynamic linker cache in a fake tree.
// Header-only; tests only.  Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace gculaunch::testing {

inline constexpr int32_t kLdFlagsX8664 = 0x0303;  // FLAG_ELF_LIBC6 | FLAG_X8664_LIB64
inline constexpr int32_t kLdFlagsI386 = 0x0003;   // FLAG_ELF_LIBC6 (32-bit)

struct FakeLib {
  int32_t flags;
  std::string name;
  std::string path;
};

template <typename T>
void PutBytes(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

/// The new format: 48-byte header, 24-byte entries, strings offset from the header.
inline std::string NewLdCache(const std::vector<FakeLib>& libs) {
  std::string strings;
  std::vector<std::pair<uint32_t, uint32_t>> offsets;
  const uint32_t base = static_cast<uint32_t>(48 + 24 * libs.size());
  for (const FakeLib& lib : libs) {
    const uint32_t key = base + static_cast<uint32_t>(strings.size());
    strings += lib.name + '\0';
    const uint32_t value = base + static_cast<uint32_t>(strings.size());
    strings += lib.path + '\0';
    offsets.emplace_back(key, value);
  }
  std::string out = "glibc-ld.so.cache1.1";
  PutBytes<uint32_t>(out, static_cast<uint32_t>(libs.size()));
  PutBytes<uint32_t>(out, static_cast<uint32_t>(strings.size()));
  out.append(4, '\0');   // flags + padding
  out.append(16, '\0');  // extension offset + unused
  for (size_t i = 0; i < libs.size(); ++i) {
    PutBytes<int32_t>(out, libs[i].flags);
    PutBytes<uint32_t>(out, offsets[i].first);
    PutBytes<uint32_t>(out, offsets[i].second);
    PutBytes<uint32_t>(out, 0);
    PutBytes<uint64_t>(out, 0);
  }
  return out + strings;
}

/// The old format alone: 16-byte header, 12-byte entries, strings offset from
/// the end of the entries.
inline std::string OldLdCache(const std::vector<FakeLib>& libs) {
  std::string strings;
  std::string out = "ld.so-1.7.0";
  out += '\0';
  PutBytes<uint32_t>(out, static_cast<uint32_t>(libs.size()));
  for (const FakeLib& lib : libs) {
    PutBytes<int32_t>(out, lib.flags);
    PutBytes<uint32_t>(out, static_cast<uint32_t>(strings.size()));
    strings += lib.name + '\0';
    PutBytes<uint32_t>(out, static_cast<uint32_t>(strings.size()));
    strings += lib.path + '\0';
  }
  return out + strings;
}

/// glibc <= 2.31's default: an old cache (one entry whose offsets mean nothing
/// to the new part), then the new cache at an 8-byte boundary.
inline std::string CompatLdCache(const std::vector<FakeLib>& libs) {
  std::string out = "ld.so-1.7.0";
  out += '\0';
  PutBytes<uint32_t>(out, 1);
  PutBytes<int32_t>(out, kLdFlagsX8664);
  PutBytes<uint32_t>(out, 999999);
  PutBytes<uint32_t>(out, 999999);
  while (out.size() % 8 != 0) out += '\0';
  return out + NewLdCache(libs);
}

}  // namespace gculaunch::testing
