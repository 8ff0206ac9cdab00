#include "base/cidr.h"

#include <charconv>
#include <cstdio>
#include <optional>

#include "base/text.h"

namespace gculaunch {
namespace {

// Four decimal numbers 0-255 separated by dots, no leading zeros beyond a single "0".
std::optional<std::array<std::uint8_t, 4>> ParseV4(std::string_view text) {
  std::array<std::uint8_t, 4> out{};
  const std::vector<std::string> parts = Split(text, '.');
  if (parts.size() != 4) return std::nullopt;
  for (std::size_t i = 0; i < 4; ++i) {
    const std::string& p = parts[i];
    if (p.empty() || p.size() > 3 || (p.size() > 1 && p[0] == '0')) return std::nullopt;
    unsigned value = 0;
    for (char c : p) {
      if (c < '0' || c > '9') return std::nullopt;
      value = value * 10 + static_cast<unsigned>(c - '0');
    }
    if (value > 255) return std::nullopt;
    out[i] = static_cast<std::uint8_t>(value);
  }
  return out;
}

// Up to 8 groups of 1-4 hex digits; one "::" stands for one or more zero groups; the last
// 32 bits may be written as an IPv4 address.
std::optional<std::array<std::uint8_t, 16>> ParseV6(std::string_view text) {
  std::vector<std::uint16_t> head;
  std::vector<std::uint16_t> tail;
  bool compressed = false;
  const std::size_t gap = text.find("::");
  std::string_view first = text;
  std::string_view second;
  if (gap != std::string_view::npos) {
    compressed = true;
    first = text.substr(0, gap);
    second = text.substr(gap + 2);
    if (second.find("::") != std::string_view::npos) return std::nullopt;
  }
  auto groups = [](std::string_view part, std::vector<std::uint16_t>& out, bool last) {
    if (part.empty()) return true;
    const std::vector<std::string> items = Split(part, ':');
    for (std::size_t i = 0; i < items.size(); ++i) {
      const std::string& g = items[i];
      if (last && i + 1 == items.size() && g.find('.') != std::string::npos) {
        auto v4 = ParseV4(g);
        if (!v4) return false;
        out.push_back(static_cast<std::uint16_t>(((*v4)[0] << 8) | (*v4)[1]));
        out.push_back(static_cast<std::uint16_t>(((*v4)[2] << 8) | (*v4)[3]));
        continue;
      }
      if (g.empty() || g.size() > 4) return false;
      unsigned value = 0;
      const auto [end, ec] = std::from_chars(g.data(), g.data() + g.size(), value, 16);
      if (ec != std::errc() || end != g.data() + g.size()) return false;
      out.push_back(static_cast<std::uint16_t>(value));
    }
    return true;
  };
  if (!groups(first, head, !compressed) || !groups(second, tail, true)) return std::nullopt;
  const std::size_t given = head.size() + tail.size();
  if (compressed ? given > 7 : given != 8) return std::nullopt;
  std::array<std::uint8_t, 16> out{};
  std::size_t at = 0;
  for (std::uint16_t g : head) {
    out[at++] = static_cast<std::uint8_t>(g >> 8);
    out[at++] = static_cast<std::uint8_t>(g & 0xff);
  }
  at = 16 - 2 * tail.size();
  for (std::uint16_t g : tail) {
    out[at++] = static_cast<std::uint8_t>(g >> 8);
    out[at++] = static_cast<std::uint8_t>(g & 0xff);
  }
  return out;
}

bool PrefixMatches(const std::uint8_t* a, const std::uint8_t* b, int bits) {
  int i = 0;
  for (; bits >= 8; bits -= 8, ++i) {
    if (a[i] != b[i]) return false;
  }
  if (bits == 0) return true;
  const auto mask = static_cast<std::uint8_t>(0xff << (8 - bits));
  return (a[i] & mask) == (b[i] & mask);
}

bool IsV4Mapped(const std::uint8_t* bytes) {
  for (int i = 0; i < 10; ++i) {
    if (bytes[i] != 0) return false;
  }
  return bytes[10] == 0xff && bytes[11] == 0xff;
}

}  // namespace

std::string Network::ToString() const {
  char text[64];
  if (!v6) {
    std::snprintf(text, sizeof text, "%u.%u.%u.%u/%d", bytes[0], bytes[1], bytes[2], bytes[3],
                  prefix);
    return text;
  }
  // RFC 5952: the longest run of two or more zero groups becomes "::".
  std::array<unsigned, 8> g{};
  for (int i = 0; i < 8; ++i) g[i] = (static_cast<unsigned>(bytes[2 * i]) << 8) | bytes[2 * i + 1];
  int best = -1;
  int best_len = 1;
  for (int i = 0; i < 8;) {
    int j = i;
    while (j < 8 && g[j] == 0) ++j;
    if (j - i > best_len) {
      best = i;
      best_len = j - i;
    }
    i = j == i ? i + 1 : j;
  }
  std::string out;
  for (int i = 0; i < 8; ++i) {
    if (i == best) {
      out += "::";
      i += best_len - 1;
      continue;
    }
    if (!out.empty() && out.back() != ':') out += ':';
    std::snprintf(text, sizeof text, "%x", g[i]);
    out += text;
  }
  return out + "/" + std::to_string(prefix);
}

Result<Network> ParseNetwork(std::string_view text) {
  const std::string quoted = "'" + std::string(text) + "'";
  const std::size_t slash = text.find('/');
  const std::string_view address = text.substr(0, slash);
  Network n;
  if (auto v4 = ParseV4(address)) {
    std::copy(v4->begin(), v4->end(), n.bytes.begin());
    n.prefix = 32;
  } else if (auto v6 = ParseV6(address)) {
    n.v6 = true;
    n.bytes = *v6;
    n.prefix = 128;
  } else {
    return Error{quoted + " is not a network: '" + std::string(address) +
                     "' is not a numeric IPv4 or IPv6 address",
                 "write networks as 10.0.0.0/8, 198.18.0.5 or fd00::/64"};
  }
  if (slash != std::string_view::npos) {
    const auto bits = ParseInteger(text.substr(slash + 1));
    if (!bits || *bits < 0 || *bits > n.prefix) {
      return Error{
          quoted + " is not a network: the prefix length must be 0 to " + std::to_string(n.prefix),
          "write networks as 10.0.0.0/8, 198.18.0.5 or fd00::/64"};
    }
    n.prefix = static_cast<int>(*bits);
  }
  // Clear the host bits: 10.1.2.3/8 is 10.0.0.0/8.
  for (int bit = n.prefix; bit < (n.v6 ? 128 : 32); ++bit) {
    n.bytes[bit / 8] &= static_cast<std::uint8_t>(~(0x80 >> (bit % 8)));
  }
  return n;
}

Result<std::vector<Network>> ParseNetworkList(std::string_view text) {
  std::vector<Network> out;
  for (const std::string& item : Split(text, ',')) {
    const std::string trimmed = Trim(item);
    if (trimmed.empty()) {
      return Error{"'" + std::string(text) + "' has an empty item",
                   "separate networks with single commas: 10.0.0.0/8,fd00::/64"};
    }
    auto n = ParseNetwork(trimmed);
    if (!n.ok()) return n.error();
    out.push_back(*n);
  }
  if (out.empty()) return Error{"no network given", "name at least one network: 10.0.0.0/8"};
  return out;
}

bool Contains(const Network& network, const std::uint8_t* bytes, std::size_t size) {
  if (size == 4) {
    return !network.v6 && PrefixMatches(network.bytes.data(), bytes, network.prefix);
  }
  if (size != 16) return false;
  if (network.v6) return PrefixMatches(network.bytes.data(), bytes, network.prefix);
  return IsV4Mapped(bytes) && PrefixMatches(network.bytes.data(), bytes + 12, network.prefix);
}

bool IsLoopback(const std::uint8_t* bytes, std::size_t size) {
  if (size == 4) return bytes[0] == 127;
  if (size != 16) return false;
  if (IsV4Mapped(bytes)) return bytes[12] == 127;
  for (int i = 0; i < 15; ++i) {
    if (bytes[i] != 0) return false;
  }
  return bytes[15] == 1;
}

}  // namespace gculaunch
