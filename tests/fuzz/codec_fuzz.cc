// libFuzzer entry over the TCPStore decoder and the store semantics.
//
// Each input is one or two connections' client-to-server bytes plus a few control bytes
// (limits, dialect mode, where to split, when to begin a new attempt).  Checked on every
// input, besides the sanitizers' own checks:
//   * decoding in one chunk and in fuzz-chosen chunks gives the same requests, the same
//     final state and the same malformed offset and reason;
//   * re-encoding the decoded requests reproduces exactly the bytes they came from;
//   * the store, fed the requests of two interleaved connections, never delivers bytes to a
//     connection that is not open, and never crashes.
// A violated check aborts, which libFuzzer reports as a crash with the input saved.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/codec.h"
#include "rendezvous/store.h"
#include "tests/rendezvous/decode_util.h"

namespace {

using namespace gculaunch::rendezvous;
using gculaunch::rendezvous::testing::Decoded;
using gculaunch::rendezvous::testing::DecodeStream;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "codec_fuzz: check failed: %s\n", what);
  std::abort();
}

// Chunk sizes for DecodeStream from the fuzz input's cut bytes, taken in turn (0 or none
// left: the rest).
struct Cuts {
  std::string_view sizes;
  std::size_t next = 0;
  std::size_t operator()(std::size_t left) {
    if (next >= sizes.size()) return left;
    const auto c = static_cast<std::size_t>(static_cast<unsigned char>(sizes[next++]));
    return c == 0 ? left : std::min(left, c);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  const std::uint8_t control = data[0];
  const std::uint8_t split = data[1];
  const std::uint8_t attempt_at = data[2];
  const std::size_t ncuts = data[3] % 16;
  if (size < 4 + ncuts) return 0;
  const std::string_view cuts(reinterpret_cast<const char*>(data + 4), ncuts);
  const std::string_view payload(reinterpret_cast<const char*>(data + 4 + ncuts), size - 4 - ncuts);

  Limits limits;
  if (control & 1) {  // small limits, so that they are hit
    limits.max_key_size = 32;
    limits.max_value_size = 64;
    limits.max_keys_per_request = 4;
    limits.max_request_size = 128;
  }
  const DialectMode mode = (control >> 1) % 3 == 0   ? DialectMode::kAuto
                           : (control >> 1) % 3 == 1 ? DialectMode::kV1
                                                     : DialectMode::kV2;

  // Two connections: the payload split at `split` (scaled).
  const std::size_t at = payload.size() * split / 255;
  const std::string_view streams[2] = {payload.substr(0, at), payload.substr(at)};
  Decoded outcomes[2];
  for (int c = 0; c < 2; ++c) {
    const Decoded whole = DecodeStream(streams[c], Cuts{}, limits, mode);
    const Decoded cut = DecodeStream(streams[c], Cuts{cuts}, limits, mode);
    if (whole.ate_after_malformed || cut.ate_after_malformed) Fail("dead decoder ate");
    if (whole.requests != cut.requests) Fail("requests differ between splits");
    if (whole.malformed != cut.malformed || whole.mid_request != cut.mid_request) {
      Fail("final state differs between splits");
    }
    if (whole.malformed &&
        (whole.error.offset != cut.error.offset || whole.error.reason != cut.error.reason)) {
      Fail("malformed report differs between splits");
    }
    // Re-encoding reproduces the bytes of the decoded requests exactly.
    if (!whole.requests.empty()) {
      Decoder probe(limits, mode);
      (void)probe.Decode(streams[c]);
      const Dialect dialect = probe.dialect().value_or(Dialect::kV1);
      std::string again;
      for (const auto& r : whole.requests) {
        if (!EncodeRequest(dialect, r, again)) Fail("decoded an op the dialect cannot encode");
      }
      if (again.size() > streams[c].size() || streams[c].substr(0, again.size()) != again) {
        Fail("re-encoding does not reproduce the input");
      }
    }
    outcomes[c] = whole;
  }

  // The store, with both connections' requests interleaved.
  Store store;
  std::set<ConnId> open = {1, 2};
  store.Open(1);
  store.Open(2);
  Effects effects;
  Reply reply;
  std::size_t next[2] = {0, 0};
  std::size_t handled = 0;
  while (next[0] < outcomes[0].requests.size() || next[1] < outcomes[1].requests.size()) {
    const int c = next[0] < outcomes[0].requests.size() &&
                          (next[1] >= outcomes[1].requests.size() || (handled & 1) == 0)
                      ? 0
                      : 1;
    const ConnId id = static_cast<ConnId>(c + 1);
    Request request = outcomes[c].requests[next[c]++];
    ++handled;
    if (handled == attempt_at) {
      auto dropped = store.BeginAttempt(store.attempt() + 1);
      if (!dropped.ok()) Fail("BeginAttempt refused an increasing attempt");
      for (ConnId d : *dropped) open.erase(d);
    }
    reply.Clear();
    effects.Clear();
    store.Handle(id, request, reply, effects);
    for (const auto& d : effects.deliveries) {
      if (open.count(d.conn) == 0) Fail("delivery to a connection that is not open");
      if (d.bytes.empty()) Fail("empty delivery");
    }
    if (!reply.empty() && open.count(id) == 0) Fail("reply to a connection that is not open");
    if (effects.close()) {
      store.Close(id);
      open.erase(id);
    }
  }
  return 0;
}
