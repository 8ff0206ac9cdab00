// The TCPStore wire protocol: constants, the two query-code tables and the reply codes.
//
// Owns nothing and does nothing: plain constexpr data shared by the codec, the store, the
// client and the tests.  The prose specification is docs/tcpstore-protocol.md (called
// "the spec" below and in rendezvous/ and its tests; every `spec` field names its section).
// Summary:
//
//   * a request is one query byte followed by query-specific fields; replies are untagged;
//   * integers are little-endian; every key and value is a `blob` = u64 length + bytes;
//   * two dialects share one port.  "v1" is torch 1.10, 1.13 and 2.0; "v2" is torch 2.2+.
//     The same byte means different things in each (spec section 3).  A v2 connection
//     always opens with VALIDATE + magic, i.e. the bytes 00 CE F7 85 3C; anything else is
//     v1 (spec section 9).  torch 2.1, whose table collides with v1 from code 7 on, is not
//     supported.
//
// Thread safety: constants only.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace gculaunch::rendezvous {

/// VALIDATE's magic number, sent by every 2.2+ client first (spec section 5, VALIDATE).
inline constexpr std::uint32_t kValidateMagic = 0x3C85F7CE;

/// The first five bytes of every v2 connection: VALIDATE (code 0) + the magic, little-endian.
inline constexpr std::array<std::uint8_t, 5> kV2Preamble = {0x00, 0xCE, 0xF7, 0x85, 0x3C};

/// Which query table a connection speaks.
enum class Dialect : std::uint8_t {
  kV1,  ///< torch 1.10, 1.13, 2.0 (spec section 3, column "v1")
  kV2,  ///< torch 2.2 and later (columns "2.2 - 2.4" to "2.8+")
};

/// Dialect-independent request kinds.  The wire code of each depends on the dialect.
enum class Op : std::uint8_t {
  kValidate,
  kSet,
  kCompareSet,
  kGet,
  kAdd,
  kCheck,
  kWait,
  kGetNumKeys,
  kWatchKey,
  kDeleteKey,
  kAppend,
  kMultiGet,
  kMultiSet,
  kCancelWait,
  kPing,
  kQueuePush,
  kQueuePop,
  kQueueLen,
  kList,
};

/// One row of a query table: the code, what it means, who sends it, where it is specified.
struct OpcodeInfo {
  std::uint8_t code;
  Op op;
  std::string_view name;      ///< upper-case name as in the spec and the traces
  std::string_view versions;  ///< torch releases that send this code with this meaning
  std::string_view spec;      ///< section of docs/tcpstore-protocol.md
};

/// v1: torch 1.10 / 1.13 / 2.0 (spec section 3).  Fields per request are in section 5.
inline constexpr std::array<OpcodeInfo, 9> kV1Opcodes = {{
    {0, Op::kSet, "SET", "1.10-2.0", "5 SET; no reply"},
    {1, Op::kCompareSet, "COMPARE_SET", "1.10-2.0", "5 COMPARE_SET; reply blob"},
    {2, Op::kGet, "GET", "1.10-2.0", "5 GET; reply blob"},
    {3, Op::kAdd, "ADD", "1.10-2.0", "5 ADD; reply i64"},
    {4, Op::kCheck, "CHECK", "1.10-2.0 (C++ API only)", "5 CHECK; reply u8"},
    {5, Op::kWait, "WAIT", "1.10-2.0", "5 WAIT and 6.2; reply u8 when all keys exist"},
    {6, Op::kGetNumKeys, "GETNUMKEYS", "1.10-2.0", "5 GETNUMKEYS; reply i64"},
    {7, Op::kWatchKey, "WATCH_KEY", "1.10-2.0 (callback connection)",
     "5 WATCH_KEY and 6.4; reply u8 3, then pushed events"},
    {8, Op::kDeleteKey, "DELETE_KEY", "1.10-2.0", "5 DELETE_KEY; reply i64"},
}};

/// v2: torch 2.2+ (spec section 3): PING from 2.5, queues from 2.8, LIST on newest main.
inline constexpr std::array<OpcodeInfo, 18> kV2Opcodes = {{
    {0, Op::kValidate, "VALIDATE", "2.2+", "5 VALIDATE; first message only; no reply"},
    {1, Op::kSet, "SET", "2.2+", "5 SET; no reply"},
    {2, Op::kCompareSet, "COMPARE_SET", "2.2+", "5 COMPARE_SET; reply blob"},
    {3, Op::kGet, "GET", "2.2+", "5 GET; reply blob"},
    {4, Op::kAdd, "ADD", "2.2+", "5 ADD; reply i64"},
    {5, Op::kCheck, "CHECK", "2.2+", "5 CHECK; reply u8"},
    {6, Op::kWait, "WAIT", "2.2+", "5 WAIT and 6.2; reply u8 when all keys exist"},
    {7, Op::kGetNumKeys, "GETNUMKEYS", "2.2+", "5 GETNUMKEYS; reply i64"},
    {8, Op::kDeleteKey, "DELETE_KEY", "2.2+", "5 DELETE_KEY; reply i64"},
    {9, Op::kAppend, "APPEND", "2.2+", "5 APPEND; no reply"},
    {10, Op::kMultiGet, "MULTI_GET", "2.2+", "5 MULTI_GET; reply n blobs"},
    {11, Op::kMultiSet, "MULTI_SET", "2.2+", "5 MULTI_SET; no reply"},
    {12, Op::kCancelWait, "CANCEL_WAIT", "2.2+", "5 CANCEL_WAIT; reply u8 1"},
    {13, Op::kPing, "PING", "2.5+", "5 PING; reply u32 echo"},
    {14, Op::kQueuePush, "QUEUE_PUSH", "2.8+", "5 QUEUE_PUSH; no reply"},
    {15, Op::kQueuePop, "QUEUE_POP", "2.8+", "5 QUEUE_POP; reply i64 [+ blob]"},
    {16, Op::kQueueLen, "QUEUE_LEN", "2.8+", "5 QUEUE_LEN; reply i64"},
    {17, Op::kList, "LIST", "newest main", "5 LIST; reply i64 n + n blobs"},
}};

/// The query table of a dialect.
constexpr std::span<const OpcodeInfo> Opcodes(Dialect dialect) {
  if (dialect == Dialect::kV1) return kV1Opcodes;
  return kV2Opcodes;
}

/// The table row for a wire code, or nullopt if the dialect has no such code.
constexpr std::optional<OpcodeInfo> LookupCode(Dialect dialect, std::uint8_t code) {
  for (const OpcodeInfo& row : Opcodes(dialect)) {
    if (row.code == code) return row;
  }
  return std::nullopt;
}

/// The table row for an operation, or nullopt if the dialect cannot express it.
constexpr std::optional<OpcodeInfo> LookupOp(Dialect dialect, Op op) {
  for (const OpcodeInfo& row : Opcodes(dialect)) {
    if (row.op == op) return row;
  }
  return std::nullopt;
}

/// Upper-case name of an operation ("WAIT"), dialect-independent.
constexpr std::string_view OpName(Op op) {
  if (auto row = LookupOp(Dialect::kV2, op)) return row->name;
  if (auto row = LookupOp(Dialect::kV1, op)) return row->name;
  return "?";
}

/// Reply byte of CHECK (spec section 4).
enum class CheckResponse : std::uint8_t { kReady = 0, kNotReady = 1 };

/// Reply byte of WAIT and CANCEL_WAIT (spec section 4; WAIT_CANCELED from 2.1).
enum class WaitResponse : std::uint8_t { kStopWaiting = 0, kWaitCanceled = 1 };

/// First byte of a WATCH_KEY acknowledgement or event on a 1.x callback connection (spec
/// section 4 and section 5 WATCH_KEY).  An event is `u8 type, blob key, blob old, blob new`.
enum class WatchResponse : std::uint8_t {
  kKeyUpdated = 0,
  kKeyCreated = 1,
  kKeyDeleted = 2,
  kKeyCallbackRegistered = 3,
};

/// Default abuse limits.  The libuv server's (8 KiB keys, 8 MiB values, 131072 keys per
/// request) are a floor (spec section 6.1); the classic 1.x server had none, so values get
/// more room here.
inline constexpr std::size_t kDefaultMaxKeySize = 1u << 20;  // 1 MiB, as the user gives it
/// torch's TCPStore client sends every key with a '/' in front (keyPrefix_): a key limit
/// counts the key as the client's caller gave it, so the wire may carry this much more.
inline constexpr std::size_t kClientKeyPrefixSize = 1;
inline constexpr std::size_t kDefaultMaxValueSize = 64u << 20;  // 64 MiB
inline constexpr std::size_t kDefaultMaxKeysPerRequest = 131072;
inline constexpr std::size_t kDefaultMaxRequestSize = 128u << 20;  // all blobs of one request
/// Unsent bytes one connection may have queued (replies and deliveries, shared values in
/// full): a watch or a WAIT of a client that does not read cannot grow beyond it.  Far above
/// a real job's needs: a MULTI_GET of 10 000 ranks' keys is a few MiB.
inline constexpr std::size_t kDefaultMaxQueued = 256u << 20;
/// Memory all connections together may hold in requests being read (partial frames
/// included) and unsent replies (each shared value once); past it, the connections holding
/// the most are closed.
inline constexpr std::size_t kDefaultMaxBuffered = 256u << 20;

}  // namespace gculaunch::rendezvous
