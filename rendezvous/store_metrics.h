// StoreMetrics: counters the store's Server keeps for whoever shows them (gculaunch's
// /metrics, docs/operations.md).  Plain numbers, no knowledge of who reads them, so the
// rendezvous layer depends on nothing above it.
//
// What is counted: connections accepted; every decoded request by operation with its latency,
// from the moment its bytes were decoded to the moment its reply was produced.  A WAIT that
// parks (its keys are missing) is measured until the reply is delivered, so WAIT's latency is
// how long clients waited for the keys.  Requests of in-process callers (the launcher) are
// not counted: only clients on the socket.
//
// Ownership: shared between the Server (ServerOptions::metrics) and the reader.
// Thread safety: the io_context's thread only (the Server writes, the reader reads on the
// same loop).
#pragma once

#include <array>
#include <cstdint>
#include <map>

#include "rendezvous/protocol.h"

namespace gculaunch::rendezvous {

class StoreMetrics {
 public:
  /// The upper bounds (seconds) of the latency histogram's buckets; +Inf is implied.
  static constexpr std::array<double, 7> kBuckets = {0.0001, 0.001, 0.01, 0.1, 1.0, 10.0, 60.0};

  struct OpStats {
    std::uint64_t count = 0;
    double sum_s = 0;
    /// Cumulative counts: buckets[i] = requests that took <= kBuckets[i].
    std::array<std::uint64_t, kBuckets.size()> buckets{};
  };

  void ConnectionAccepted() { ++connections_total_; }
  void Operation(Op op, double seconds);

  std::uint64_t connections_total() const { return connections_total_; }
  const std::map<Op, OpStats>& operations() const { return ops_; }

 private:
  std::uint64_t connections_total_ = 0;
  std::map<Op, OpStats> ops_;
};

inline void StoreMetrics::Operation(Op op, double seconds) {
  OpStats& s = ops_[op];
  ++s.count;
  s.sum_s += seconds;
  for (std::size_t i = 0; i < kBuckets.size(); ++i) {
    if (seconds <= kBuckets[i]) ++s.buckets[i];
  }
}

}  // namespace gculaunch::rendezvous
