#include "launcher/check/ld_cache.h"

#include <cstring>

namespace gculaunch {
namespace {

constexpr std::string_view kOldMagic = "ld.so-1.7.0";           // 11 bytes, header 16
constexpr std::string_view kNewMagic = "glibc-ld.so.cache1.1";  // 20 bytes, header 48
constexpr size_t kOldHeader = 16;
constexpr size_t kOldEntry = 12;
constexpr size_t kNewHeader = 48;
constexpr size_t kNewEntry = 24;
// Bounds a corrupt count before it turns into a huge allocation.
constexpr uint32_t kMaxEntries = 1u << 22;

// glibc's FLAG_ELF_LIBC6 and the architecture bits of x86-64.
constexpr int32_t kTypeMask = 0x00ff;
constexpr int32_t kRequiredMask = 0xff00;
constexpr int32_t kElfLibc6 = 0x0003;
constexpr int32_t kX8664Lib64 = 0x0300;

uint32_t U32(std::string_view bytes, size_t at) {
  uint32_t value = 0;
  std::memcpy(&value, bytes.data() + at, sizeof(value));
  return value;
}

// The NUL-terminated string at `offset` in `table`, or nothing if it runs off the end.
bool StringAt(std::string_view table, uint32_t offset, std::string& out) {
  if (offset >= table.size()) return false;
  const size_t end = table.find('\0', offset);
  if (end == std::string_view::npos) return false;
  out.assign(table.substr(offset, end - offset));
  return true;
}

// `count` entries of `stride` bytes from `first` on, each starting with flags (int32), the
// name's offset and the path's offset (uint32) into `table`.  The caller checked the bounds.
Result<std::vector<LdCacheEntry>> ReadEntries(std::string_view bytes, size_t first, size_t stride,
                                              uint32_t count, std::string_view table) {
  std::vector<LdCacheEntry> entries;
  entries.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    const size_t at = first + size_t{i} * stride;
    LdCacheEntry entry;
    std::memcpy(&entry.flags, bytes.data() + at, sizeof(entry.flags));
    if (!StringAt(table, U32(bytes, at + 4), entry.name) ||
        !StringAt(table, U32(bytes, at + 8), entry.path)) {
      return Error{"ld.so.cache entry " + std::to_string(i) + " points outside the file", ""};
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

Result<std::vector<LdCacheEntry>> ParseNew(std::string_view cache) {
  if (cache.size() < kNewHeader) return Error{"truncated ld.so.cache header", ""};
  const uint32_t count = U32(cache, 20);
  if (count > kMaxEntries || kNewHeader + size_t{count} * kNewEntry > cache.size()) {
    return Error{"ld.so.cache claims " + std::to_string(count) + " entries but is only " +
                     std::to_string(cache.size()) + " bytes",
                 ""};
  }
  return ReadEntries(cache, kNewHeader, kNewEntry, count, cache);
}

}  // namespace

bool LdCacheEntry::MatchesHost() const {
  if ((flags & kTypeMask) != kElfLibc6) return false;
#if defined(__x86_64__)
  return (flags & kRequiredMask) == kX8664Lib64;
#else
  return true;
#endif
}

Result<std::vector<LdCacheEntry>> ParseLdCache(std::string_view bytes) {
  if (bytes.substr(0, kNewMagic.size()) == kNewMagic) return ParseNew(bytes);
  if (bytes.substr(0, kOldMagic.size()) != kOldMagic) {
    return Error{"not an ld.so.cache file (unknown magic)", ""};
  }
  if (bytes.size() < kOldHeader) return Error{"truncated ld.so.cache header", ""};
  const uint32_t count = U32(bytes, 12);
  const size_t old_end = kOldHeader + size_t{count} * kOldEntry;
  if (count > kMaxEntries || old_end > bytes.size()) {
    return Error{"ld.so.cache claims " + std::to_string(count) + " entries but is only " +
                     std::to_string(bytes.size()) + " bytes",
                 ""};
  }
  // Compat layout: the new-format cache follows, aligned like its header (8).
  const size_t new_at = (old_end + 7) / 8 * 8;
  if (new_at < bytes.size() && bytes.substr(new_at, kNewMagic.size()) == kNewMagic) {
    return ParseNew(bytes.substr(new_at));
  }
  // Old format alone: strings are offsets from the end of the entries.
  return ReadEntries(bytes, kOldHeader, kOldEntry, count, bytes.substr(old_end));
}

}  // namespace gculaunch
