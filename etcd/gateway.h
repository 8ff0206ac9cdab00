// Gateway: the JSON of etcd v3's HTTP gateway, both ways, with no I/O.
//
// etcd (3.4) serves its gRPC API as HTTP/1.1 + JSON under /v3/... through grpc-gateway. The
// JSON is protobuf's JSON mapping, with traps that every caller would otherwise trip over
// (docs/etcd.md, "Gateway traps"):
//   * keys, values and range_end are base64 (bytes fields);
//   * 64-bit integers (revisions, lease ids, counts) are JSON strings, and a field holding its
//     default value (0, false, "", PUT) is left out entirely: a failed transaction has no
//     `succeeded`, a keepalive on an expired lease has no `TTL`, a range with no match has no
//     `kvs`;
//   * errors are an object with `error`/`message` and a gRPC `code`, sent with an HTTP error
//     status, while a streamed call (keepalive, watch) wraps each message in `result`.
// The builders here produce request bodies and the parsers turn reply bodies into the plain
// structs below, so the client (client.h) only moves bytes. Parsers never throw: malformed
// input is an Error naming the call and the field.
//
// Thread safety: pure functions on values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace gculaunch::etcd {

// ---- bytes ----

/// Standard base64 with padding (what protobuf's JSON mapping uses for bytes).
std::string Base64Encode(std::string_view bytes);
/// Decodes standard or URL-safe base64, with or without padding; an Error on any other byte.
Result<std::string> Base64Decode(std::string_view text);

/// The range_end that selects every key starting with `prefix`: the prefix with its last byte
/// plus one, after dropping trailing 0xff bytes. An empty or all-0xff prefix gives "\0", which
/// etcd reads as "every key from `key` on".
std::string PrefixEnd(std::string_view prefix);

// ---- values ----

struct KeyValue {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;  ///< 0 in a compare means "the key does not exist"
  std::int64_t mod_revision = 0;
  std::int64_t version = 0;  ///< number of puts since creation
  std::int64_t lease = 0;    ///< the lease the key is attached to; 0: none
};

struct RangeResponse {
  std::int64_t revision = 0;  ///< the store's revision when the range was served
  std::vector<KeyValue> kvs;
  std::int64_t count = 0;  ///< keys in the range (may exceed kvs.size() with a limit)
  bool more = false;
};

struct PutResponse {
  std::int64_t revision = 0;
};

struct DeleteResponse {
  std::int64_t revision = 0;
  std::int64_t deleted = 0;
};

// ---- transactions ----

enum class CompareTarget { kVersion, kCreateRevision, kModRevision, kValue, kLease };
enum class CompareOp { kEqual, kGreater, kLess, kNotEqual };

/// One guard of a transaction: `target` of `key` compared with `number` (or `value`).
struct Compare {
  std::string key;
  CompareTarget target = CompareTarget::kCreateRevision;
  CompareOp op = CompareOp::kEqual;
  std::int64_t number = 0;  ///< for kVersion, kCreateRevision, kModRevision, kLease
  std::string value;        ///< for kValue

  /// The key does not exist (create_revision == 0): create-only writes.
  static Compare Missing(std::string key);
  /// The key exists and was created at `revision` (a leader's guard on its election key).
  static Compare CreatedAt(std::string key, std::int64_t revision);
  /// The key was last written at `revision` (compare-and-swap on a read value).
  static Compare ModifiedAt(std::string key, std::int64_t revision);
};

/// One operation of a transaction (or of its failure branch).
struct RequestOp {
  enum class Kind { kRange, kPut, kDelete };
  Kind kind = Kind::kRange;
  std::string key;
  std::string range_end;   ///< kRange/kDelete: "" for the one key
  std::string value;       ///< kPut
  std::int64_t lease = 0;  ///< kPut: attach to this lease; 0: none

  static RequestOp Get(std::string key);
  static RequestOp GetPrefix(const std::string& prefix);
  static RequestOp Put(std::string key, std::string value, std::int64_t lease = 0);
  static RequestOp Delete(std::string key);
  static RequestOp DeletePrefix(const std::string& prefix);
};

struct TxnRequest {
  std::vector<Compare> compare;    ///< all must hold for `success` to run
  std::vector<RequestOp> success;  ///< run when every compare holds
  std::vector<RequestOp> failure;  ///< run otherwise (e.g. read what is in the way)
};

/// The answer to one RequestOp, in order: `range` for kRange, `deleted` for kDelete.
struct ResponseOp {
  RequestOp::Kind kind = RequestOp::Kind::kRange;
  RangeResponse range;
  std::int64_t deleted = 0;
};

struct TxnResponse {
  bool succeeded = false;  ///< false also when the gateway left the field out
  std::int64_t revision = 0;
  std::vector<ResponseOp> responses;
};

// ---- leases ----

struct Lease {
  std::int64_t id = 0;
  std::int64_t ttl = 0;  ///< seconds granted
};

/// The outcome of one keepalive: alive with its refreshed TTL, or expired (or revoked; etcd
/// does not tell the two apart), in which case every key attached to it is gone.
struct KeepAliveResponse {
  bool expired = false;
  std::int64_t ttl = 0;  ///< seconds left; 0 when expired
};

// ---- watches ----

struct Event {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  KeyValue kv;  ///< for kDelete only key and mod_revision (the deletion's revision) are set
};

/// One message of a watch stream.
struct WatchMessage {
  std::int64_t watch_id = 0;
  std::int64_t revision = 0;  ///< the header's revision
  bool created = false;
  bool canceled = false;
  std::int64_t compact_revision = 0;  ///< > 0: the start revision was compacted away
  std::string cancel_reason;
  std::vector<Event> events;
};

struct VersionInfo {
  std::string server;   ///< "3.4.23"
  std::string cluster;  ///< "3.4.0"
};

// ---- errors ----

/// The error object of the gateway: gRPC status code and message.
struct GatewayError {
  int code = 0;  ///< gRPC code: 3 invalid argument, 5 not found, 11 out of range (compacted),
                 ///< 14 unavailable, 16 unauthenticated
  std::string message;
};
inline constexpr int kCodeUnavailable = 14;
inline constexpr int kCodeUnauthenticated = 16;

// ---- request bodies (JSON text) ----

std::string RangeBody(std::string_view key, std::string_view range_end, std::int64_t revision);
std::string PutBody(std::string_view key, std::string_view value, std::int64_t lease);
std::string DeleteBody(std::string_view key, std::string_view range_end);
std::string TxnBody(const TxnRequest& txn);
std::string LeaseGrantBody(std::int64_t ttl_seconds);
std::string LeaseIdBody(std::int64_t id);  ///< keepalive and revoke
std::string CompactBody(std::int64_t revision);
std::string AuthenticateBody(std::string_view user, std::string_view password);
std::string WatchCreateBody(std::string_view key, std::string_view range_end,
                            std::int64_t start_revision, bool prev_kv);

// ---- reply bodies ----
// `call` names the request in error messages ("range", "txn", ...).

/// The gateway's error object in `body`, if it is one (any HTTP status).
std::optional<GatewayError> ParseGatewayError(std::string_view body);

Result<RangeResponse> ParseRange(std::string_view body);
Result<PutResponse> ParsePut(std::string_view body);
Result<DeleteResponse> ParseDelete(std::string_view body);
Result<TxnResponse> ParseTxn(std::string_view body);
Result<Lease> ParseLeaseGrant(std::string_view body);
Result<KeepAliveResponse> ParseKeepAlive(std::string_view body);
/// Any reply whose only content is its header: the header's revision.
Result<std::int64_t> ParseHeaderRevision(std::string_view body, std::string_view call);
Result<std::string> ParseAuthenticate(std::string_view body);
/// One line of a watch stream (`{"result": {...}}` or an error object).
Result<WatchMessage> ParseWatchLine(std::string_view line);
Result<VersionInfo> ParseVersion(std::string_view body);

}  // namespace gculaunch::etcd
