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
// The encoding helpers append little-endian fields to a std::string (requests, by the
// client and the tests) or to a Reply (the store's replies).  A Reply is a list of pieces:
// bytes of its own, and stored values it shares with the store instead of copying them, so
// that a GET or a MULTI_GET costs the number of names, not the bytes of the values; the
// server writes the pieces with gather I/O.  A ValueLedger counts the values that queued
// replies share, each once however many replies name it: the bytes they keep alive.
//
// Limits: every length prefix and count is checked against Limits *before* any allocation.
//
// No sockets, no Boost, no clock.  Thread safety: a Decoder is a plain value used by one
// thread; the free functions are reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
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
  // Enforced by the server, not the Decoder (protocol.h):
  std::size_t max_queued = kDefaultMaxQueued;      ///< unsent bytes per connection
  std::size_t max_buffered = kDefaultMaxBuffered;  ///< request + unsent bytes, all connections
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
  /// Frees what the last request holds beyond a few KiB (large keys and values, a long key
  /// list), so that between requests a connection holds no request bytes that no budget
  /// counts.  Call once the request was handled.
  void TrimRequest();
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
  /// Memory the unfinished request holds: its keys and values received so far, with the
  /// spare capacity of the one being filled.  0 between requests.
  std::size_t buffered() const;

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
  std::size_t held_ = 0;             ///< blob bytes received so far in this request

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

/// A stored value: immutable once stored, shared by the store and every reply that names it.
using SharedValue = std::shared_ptr<const std::string>;

/// Counts the bytes of the distinct values that queued replies share (see the file comment).
class ValueLedger {
 public:
  void Pin(const std::string* value);
  /// REQUIRES: `value` was pinned and has not changed since.
  void Unpin(const std::string* value);
  /// Bytes of the values pinned at least once.
  std::size_t bytes() const { return bytes_; }

 private:
  std::unordered_map<const std::string*, std::size_t> pins_;
  std::size_t bytes_ = 0;
};

/// Bytes to send to one connection, in order: pieces of its own bytes and shared values.
/// A Reply attached to a ValueLedger pins every shared value it holds until the piece is
/// dropped (DropFront, TakeFront, Clear, destruction).  Not copyable (Clone copies, without
/// a ledger); a move takes the pieces and their pins.
class Reply {
 public:
  struct Piece {
    std::string bytes;  ///< the piece's own bytes, when `value` is null
    SharedValue value;  ///< a shared stored value, sent whole
    std::string_view view() const { return value ? std::string_view(*value) : bytes; }
  };
  /// Values up to this many bytes are copied into the reply (cheaper than sharing), so the
  /// bytes a reply owns stay below (8 + kCopyUpTo) per name.
  static constexpr std::size_t kCopyUpTo = 256;

  explicit Reply(ValueLedger* ledger = nullptr) : ledger_(ledger) {}
  ~Reply();
  Reply(Reply&& other) noexcept;
  Reply& operator=(Reply&& other) noexcept;
  Reply(const Reply&) = delete;
  Reply& operator=(const Reply&) = delete;
  /// A copy of the pieces (values shared, not copied), attached to no ledger.
  Reply Clone() const;

  /// Appends bytes of the reply's own (merged into the last piece when it is its own).
  void Append(std::string_view bytes);
  /// Appends `value` whole: copied when small, else shared.
  void AppendValue(const SharedValue& value);
  /// Appends every piece of `other`, which is left empty.
  void AppendReply(Reply&& other);

  /// Bytes still to send.
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  /// Bytes of the pieces of its own: the memory the reply holds besides shared values.
  std::size_t own_bytes() const { return own_; }
  /// Pieces still to send; piece(0) starts at front_offset().
  std::size_t pieces() const { return pieces_.size() - head_; }
  const Piece& piece(std::size_t i) const { return pieces_[head_ + i]; }
  std::size_t front_offset() const { return front_offset_; }

  /// Drops the first `n` bytes (they were sent).
  void Consume(std::size_t n);
  /// Moves the remaining pieces to the end of `out` and leaves the reply empty; returns how
  /// many bytes of the first moved piece were already sent.  Their pins go with them: the
  /// caller unpins each shared value it took once it is done with it.
  std::size_t TakeAll(std::vector<Piece>& out);
  /// Drops every piece.
  void Clear();
  /// All bytes still to send, in one string (tests, in-process callers).
  std::string Flatten() const;

 private:
  void Push(Piece piece);
  void Release(const Piece& piece);

  ValueLedger* ledger_;
  std::vector<Piece> pieces_;
  std::size_t head_ = 0;          ///< pieces before it were sent
  std::size_t front_offset_ = 0;  ///< bytes of piece(0) already sent
  std::size_t size_ = 0;
  std::size_t own_ = 0;
};

void AppendU8(Reply& out, std::uint8_t value);
void AppendU32(Reply& out, std::uint32_t value);
void AppendI64(Reply& out, std::int64_t value);
/// u64 length + bytes (copied).
void AppendBlob(Reply& out, std::string_view bytes);
/// u64 length + the value (shared when large); a null value is an empty blob.
void AppendBlob(Reply& out, const SharedValue& value);

/// Reads a little-endian integer from the first bytes of `p`.  REQUIRES: enough bytes.
std::uint64_t LoadU64(const std::uint8_t* p);
std::uint32_t LoadU32(const std::uint8_t* p);

/// Appends the wire form of `request` in `dialect`.  Returns false (appending nothing) if
/// the dialect has no code for request.op.
bool EncodeRequest(Dialect dialect, const Request& request, std::string& out);

}  // namespace gculaunch::rendezvous
