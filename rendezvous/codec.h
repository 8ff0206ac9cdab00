// The TCPStore codec: bytes of one connection -> requests, and requests/replies -> bytes.
//
// Decoder is an incremental parser for the client-to-server byte stream of ONE connection.
// Feed it whatever a read returned; it reports NeedMore, one complete Request, or
// Malformed{offset, reason}.  Any split of the same bytes gives the same sequence of
// results, including the byte offset of a malformed field.  Each byte is looked at once and
// copied at most once (into the request's key or value string), so a large value arriving
// in many small reads costs O(size), and memory held for an incomplete value never exceeds
// what actually arrived (a length prefix alone reserves nothing).
//
// The dialect (protocol.h) is decided lazily from the first bytes: a connection that starts
// with 00 CE F7 85 3C speaks v2, anything else v1.  Until the first byte differs from that
// preamble (or all five matched) the decoder holds at most five bytes and reports NeedMore;
// a silent 1.x callback connection therefore never gets a dialect at all.
//
// The encoding helpers append little-endian fields to a std::string; they are used for
// replies by the store and for requests by the client and the tests.
//
// Limits: every length prefix and count is checked against Limits *before* any allocation.
//
// No sockets, no Boost, no clock.  Thread safety: a Decoder is a plain value used by one
// thread; the free functions are reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/protocol.h"

namespace gculaunch::rendezvous {

/// One decoded request.  Which fields are meaningful depends on `op` (section 5 of the spec,
/// docs/tcpstore-protocol.md):
///   keys:   SET, COMPARE_SET, GET, ADD, WATCH_KEY, DELETE_KEY, APPEND, QUEUE_*: one key;
///           CHECK, WAIT, MULTI_GET, MULTI_SET: n keys
///   values: SET, APPEND, QUEUE_PUSH: one value; COMPARE_SET: {expected, desired};
///           MULTI_SET: n values, values[i] belongs to keys[i]
///   delta:  ADD
///   word:   VALIDATE (the magic), PING (the nonce)
struct Request {
  Op op = Op::kGetNumKeys;
  std::vector<std::string> keys;
  std::vector<std::string> values;
  std::int64_t delta = 0;
  std::uint32_t word = 0;

  bool operator==(const Request&) const = default;
};

/// Short human-readable form for logs and test failures: `WAIT ["/a", "/b"]`.
std::string Describe(const Request& request);

/// A key or value for a log line: quoted, bytes outside printable ASCII as \xNN, cut after
/// 80 bytes.
std::string QuoteForLog(std::string_view bytes);

/// Abuse limits (spec section 6.1).  A request that exceeds one is Malformed.
struct Limits {
  /// Bytes per key as a torch client's caller gives it: the wire may carry
  /// kClientKeyPrefixSize more (the client's '/'), so a key of exactly this size is accepted.
  std::size_t max_key_size = kDefaultMaxKeySize;
  std::size_t max_value_size = kDefaultMaxValueSize;             ///< bytes per value
  std::size_t max_keys_per_request = kDefaultMaxKeysPerRequest;  ///< n of CHECK/WAIT/MULTI_*
  std::size_t max_request_size = kDefaultMaxRequestSize;         ///< sum of all blobs of a request
};

/// How a Decoder picks its dialect.
enum class DialectMode : std::uint8_t {
  kAuto,  ///< from the first bytes (the server's mode)
  kV1,    ///< always v1
  kV2,    ///< always v2; the first request must still be VALIDATE with the right magic
};

/// Where and why a byte stream stopped making sense.
struct Malformed {
  std::uint64_t offset = 0;  ///< stream offset of the first byte of the offending field
  std::string reason;        ///< one line, e.g. "unknown query code 0x09 (torch 1.x dialect)"
};

/// Incremental request parser for one connection (see the file comment).
class Decoder {
 public:
  enum class Status : std::uint8_t { kNeedMore, kRequest, kMalformed };
  struct Step {
    Status status;
    std::size_t consumed;  ///< bytes of the input used; feed the rest in the next call
  };

  explicit Decoder(const Limits& limits = Limits{}, DialectMode mode = DialectMode::kAuto);

  /// Consumes input until one request completes (kRequest: request() holds it until the
  /// next call), the input is used up (kNeedMore: all of it was consumed), or the stream is
  /// malformed (kMalformed: malformed() says why; every later call returns kMalformed and
  /// consumes nothing).
  Step Decode(std::span<const std::uint8_t> input);
  Step Decode(std::string_view input) {
    return Decode(std::span(reinterpret_cast<const std::uint8_t*>(input.data()), input.size()));
  }

  /// The request completed by the last kRequest.  The caller may move strings out of it.
  Request& request() { return request_; }
  /// REQUIRES: the last Decode returned kMalformed.
  const Malformed& malformed() const { return malformed_; }
  /// The connection's dialect, once its first bytes decided it.
  std::optional<Dialect> dialect() const { return dialect_; }
  /// Total bytes consumed so far.
  std::uint64_t consumed() const { return consumed_; }
  /// Number of complete requests decoded so far.
  std::uint64_t requests() const { return requests_; }
  /// True while bytes of an unfinished request (or undecided preamble) are held.
  bool mid_request() const;

 private:
  enum class Field : std::uint8_t { kQuery, kCount, kKeyLen, kValueLen, kBytes, kI64, kU32 };

  Status Parse(const std::uint8_t* data, std::size_t size, std::size_t& used);
  Status StartRequest(std::uint8_t code);
  Status FixedFieldDone();
  Status BlobLengthDone(bool is_key, std::uint64_t length);
  Status NextField();
  void Expect(Field field);
  Status Want(Field field);  ///< Expect(field), then "need more bytes"
  Status Fail(std::uint64_t offset, std::string reason);

  Limits limits_;
  DialectMode mode_;
  std::optional<Dialect> dialect_;

  // Preamble bytes held while the dialect is undecided, then replayed through Parse.
  std::uint8_t preamble_[5] = {};
  std::uint8_t preamble_len_ = 0;
  std::uint8_t preamble_parsed_ = 0;

  Field field_ = Field::kQuery;
  std::uint8_t fixed_[8] = {};  ///< bytes of a fixed-size field received so far
  std::uint8_t fixed_have_ = 0;
  std::uint8_t fixed_need_ = 0;
  std::string* blob_ = nullptr;  ///< the key or value being filled (kBytes)
  std::uint64_t blob_left_ = 0;
  std::uint64_t count_ = 0;  ///< declared n of CHECK/WAIT/MULTI_GET/MULTI_SET
  bool have_count_ = false;
  bool have_delta_ = false;
  bool have_word_ = false;
  bool in_request_ = false;
  std::uint64_t request_bytes_ = 0;  ///< blob bytes declared so far in this request

  std::uint64_t parsed_ = 0;        ///< stream offset of the next byte Parse looks at
  std::uint64_t field_offset_ = 0;  ///< stream offset where the current field began
  std::uint64_t consumed_ = 0;
  std::uint64_t requests_ = 0;
  bool dead_ = false;

  Request request_;
  Malformed malformed_;
};

// ---- encoding (little-endian, spec section 2) ----

void AppendU8(std::string& out, std::uint8_t value);
void AppendU32(std::string& out, std::uint32_t value);
void AppendU64(std::string& out, std::uint64_t value);
void AppendI64(std::string& out, std::int64_t value);
/// u64 length + bytes.
void AppendBlob(std::string& out, std::string_view bytes);

/// Reads a little-endian integer from the first bytes of `p`.  REQUIRES: enough bytes.
std::uint64_t LoadU64(const std::uint8_t* p);
std::uint32_t LoadU32(const std::uint8_t* p);

/// Appends the wire form of `request` in `dialect`.  Returns false (appending nothing) if
/// the dialect has no code for request.op.
bool EncodeRequest(Dialect dialect, const Request& request, std::string& out);

}  // namespace gculaunch::rendezvous
