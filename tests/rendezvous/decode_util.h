// Test helpers: run a whole byte stream through a Decoder under a chosen split, and build
// requests tersely.  Header-only; used by the codec, trace-replay and store tests and by the
// fuzz target (so nothing here may use Catch).
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/codec.h"

namespace gculaunch::rendezvous::testing {

/// Everything a Decoder produced for one stream.
struct Decoded {
  std::vector<Request> requests;
  bool malformed = false;
  Malformed error;
  bool mid_request = false;  ///< the stream ended inside a request (or preamble)
  std::optional<Dialect> dialect;
  bool ate_after_malformed = false;  ///< a dead decoder consumed bytes (must never happen)

  bool operator==(const Decoded& o) const {
    return requests == o.requests && malformed == o.malformed && error.offset == o.error.offset &&
           error.reason == o.error.reason && mid_request == o.mid_request && dialect == o.dialect &&
           ate_after_malformed == o.ate_after_malformed;
  }
};

/// Feeds `stream` in chunks whose sizes come from `next_chunk` (called with the bytes left,
/// returns 1..left).  Stops at the first malformed result.
template <typename ChunkFn>
Decoded DecodeStream(std::string_view stream, ChunkFn next_chunk, const Limits& limits = {},
                     DialectMode mode = DialectMode::kAuto) {
  Decoder decoder(limits, mode);
  Decoded out;
  std::size_t pos = 0;
  while (pos < stream.size() && !out.malformed) {
    const std::size_t size = next_chunk(stream.size() - pos);
    std::string_view chunk = stream.substr(pos, size);
    pos += size;
    while (true) {
      const auto step = decoder.Decode(chunk);
      chunk.remove_prefix(step.consumed);
      if (step.status == Decoder::Status::kRequest) {
        out.requests.push_back(decoder.request());
        continue;
      }
      if (step.status == Decoder::Status::kMalformed) {
        out.malformed = true;
        out.error = decoder.malformed();
        out.ate_after_malformed = decoder.Decode(chunk).consumed != 0;
      }
      break;
    }
  }
  out.mid_request = decoder.mid_request();
  out.dialect = decoder.dialect();
  return out;
}

inline Decoded DecodeWhole(std::string_view stream, const Limits& limits = {},
                           DialectMode mode = DialectMode::kAuto) {
  return DecodeStream(
      stream, [](std::size_t left) { return left; }, limits, mode);
}

inline Decoded DecodeBytewise(std::string_view stream, const Limits& limits = {},
                              DialectMode mode = DialectMode::kAuto) {
  return DecodeStream(
      stream, [](std::size_t) { return std::size_t{1}; }, limits, mode);
}

inline Decoded DecodeRandomSplits(std::string_view stream, std::uint32_t seed,
                                  const Limits& limits = {},
                                  DialectMode mode = DialectMode::kAuto) {
  std::mt19937 rng(seed);
  return DecodeStream(
      stream,
      [&rng](std::size_t left) {
        std::uniform_int_distribution<std::size_t> pick(1, std::min<std::size_t>(left, 23));
        return pick(rng);
      },
      limits, mode);
}

inline Request Req(Op op, std::vector<std::string> keys = {}, std::vector<std::string> values = {},
                   std::int64_t delta = 0, std::uint32_t word = 0) {
  Request r;
  r.op = op;
  r.keys = std::move(keys);
  r.values = std::move(values);
  r.delta = delta;
  r.word = word;
  return r;
}

inline std::string Encode(Dialect dialect, const Request& request) {
  std::string out;
  EncodeRequest(dialect, request, out);
  return out;
}

/// Bytes from a hex string ("00cef7853c").
inline std::string FromHex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

inline std::string ToHex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

}  // namespace gculaunch::rendezvous::testing
