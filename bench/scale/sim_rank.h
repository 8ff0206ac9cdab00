// SimRank: one simulated PyTorch rank's start-up traffic to the job's store, for the scale
// harness (bench/scale.py, docs/benchmarks.md "The control plane at scale").
//
// What a rank of an NCCL job does to the TCPStore while init_process_group and its first
// collective run, request for request (docs/tcpstore-protocol.md sections 7 and 8; the key
// names as torch builds them, read in the 1.13 and 2.6 sources; the traces in tests/traces
// show the same steps for gloo):
//
//   torch 1.13 (v1)                            torch 2.x (v2)
//   connect (main)                             connect, VALIDATE + PING (pid), PING reply
//   ADD init/ +1 (the counter a hosting        ADD init/ +1
//     rank 0 checks)
//   connect (the silent callback connection)
//   barrier: ADD B +1, then ADD B +0 every     barrier (TORCH_DIST_INIT_BARRIER=1): ADD B +1,
//     10 ms until it reads WORLD_SIZE            ADD B +0; the rank that reads WORLD_SIZE
//                                                SETs B:last_worker; every rank WAITs for it
//   unique id: rank 0 SETs U (128 bytes);      the same, on 2.x's key
//     the others WAIT [U], then GET U
//
//   B (1.13) = //worker/attempt_<n>/default_pg/store_based_barrier_key:1
//   U (1.13) = //worker/attempt_<n>/default_pg/0/0
//   B (2.x)  = /default_pg/store_based_barrier_key:0        (no attempt prefix in 2.x)
//   U (2.x)  = /default_pg/0//cuda//0
//
// Then the rank holds its connections, as a training process does, until Stop().  Each
// connection is bound to the rank's own source address first (IP_BIND_ADDRESS_NO_PORT), so
// that more than one source address's ~28k ephemeral ports can reach one store port.  A
// refused or reset connect is retried as torch does (1.13: every second; 2.x: exponential
// back-off with jitter) until `connect_timeout`.
//
// Reports go to the `events` callbacks: the barrier passed, the unique id read, or a
// failure (one line naming the step and the error).  Times are steady_clock (CLOCK_MONOTONIC,
// comparable between the processes of one machine).
//
// Ownership: a SimRank is a std::shared_ptr; its coroutine holds one, so Stop() may be
// called at any time and the object dies when both let go.  Thread safety: the
// io_context's thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "rendezvous/protocol.h"

namespace gculaunch::bench {

/// Which rank, where its store is, and how it talks to it.
struct RankSetup {
  int rank = 0;
  int world_size = 1;
  int restart_count = 0;                 ///< TORCHELASTIC_RESTART_COUNT (1.13's key prefix)
  std::string store_host = "127.0.0.1";  ///< MASTER_ADDR (numeric)
  std::uint16_t store_port = 29500;      ///< MASTER_PORT
  std::string source;                    ///< numeric address to connect from; "": any
  rendezvous::Dialect dialect = rendezvous::Dialect::kV1;
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(300)};
  /// The most ADD +0 polls of a 1.13 barrier (then the rank fails): bounds the loop.
  int max_polls = 60000;
};

struct RankEvents {
  std::function<void(double t)> barrier;  ///< passed the barrier of init_process_group
  std::function<void(double t)> uid;      ///< read (or, rank 0, published) the unique id
  std::function<void(const std::string& what)> failed;
};

/// Seconds of steady_clock, as printed by the harness.
double MonotonicNow();

/// The keys of `setup`'s dialect and attempt (see the file comment).
std::string BarrierKey(const RankSetup& setup);
std::string UniqueIdKey(const RankSetup& setup);

class SimRank : public std::enable_shared_from_this<SimRank> {
 public:
  SimRank(boost::asio::io_context& io, RankSetup setup, RankEvents events);
  SimRank(const SimRank&) = delete;
  SimRank& operator=(const SimRank&) = delete;

  /// Starts the rank's traffic.
  void Start();
  /// Closes its connections (the process died); no event is reported afterwards.
  void Stop();
  bool stopped() const { return stopped_; }

 private:
  class Flow;

  boost::asio::io_context& io_;
  RankSetup setup_;
  RankEvents events_;
  boost::asio::ip::tcp::socket main_;
  boost::asio::ip::tcp::socket callback_;  ///< 1.13's silent second connection
  boost::asio::steady_timer timer_;        ///< back-off and barrier polls
  bool stopped_ = false;
};

}  // namespace gculaunch::bench
