#include "rendezvous/codec.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace gculaunch::rendezvous {
namespace {

std::string_view DialectName(Dialect dialect) {
  return dialect == Dialect::kV1 ? "torch 1.x" : "torch 2.x";
}

std::string Hex8(std::uint8_t code) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", code);
  return buf;
}

// An empty value for a missing element: the encoder writes what a well-formed request would,
// never reads past a caller's short list.
std::string_view At(const std::vector<std::string>& v, std::size_t i) {
  return i < v.size() ? std::string_view(v[i]) : std::string_view();
}

}  // namespace

// Printable ASCII as is, every other byte escaped, and at most 80 of them: a hostile client's
// key cannot put a terminal escape or a megabyte into gculaunch's log.
std::string QuoteForLog(std::string_view bytes) {
  constexpr std::size_t kMax = 80;
  std::string out = "\"";
  for (std::size_t i = 0; i < bytes.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  if (bytes.size() > kMax) out += "...";
  out += '"';
  return out;
}

std::string Describe(const Request& request) {
  std::string out(OpName(request.op));
  if (!request.keys.empty()) {
    out += " [";
    for (std::size_t i = 0; i < request.keys.size(); ++i) {
      if (i == 8) {  // a WAIT on thousands of keys stays one readable line
        out += ", ... " + std::to_string(request.keys.size()) + " keys";
        break;
      }
      if (i > 0) out += ", ";
      out += QuoteForLog(request.keys[i]);
    }
    out += ']';
  }
  if (!request.values.empty()) {
    std::size_t total = 0;
    for (const auto& v : request.values) total += v.size();
    out += " values=" + std::to_string(request.values.size()) + " bytes=" + std::to_string(total);
  }
  if (request.op == Op::kAdd) out += " delta=" + std::to_string(request.delta);
  if (request.op == Op::kValidate || request.op == Op::kPing) {
    out += " word=" + std::to_string(request.word);
  }
  return out;
}

// ---- Decoder ----

Decoder::Decoder(const Limits& limits, DialectMode mode) : limits_(limits), mode_(mode) {
  if (mode_ == DialectMode::kV1) dialect_ = Dialect::kV1;
  if (mode_ == DialectMode::kV2) dialect_ = Dialect::kV2;
}

bool Decoder::mid_request() const { return in_request_ || preamble_parsed_ < preamble_len_; }

void Decoder::TrimRequest() {
  constexpr std::size_t kKeep = 4096;  // small strings keep their buffers for the next request
  // One large request must not pin its memory for the connection's whole life.
  auto trim = [](std::vector<std::string>& list) {
    if (list.size() > 64) {
      std::vector<std::string>().swap(list);
      return;
    }
    for (std::string& s : list) {
      if (s.capacity() > kKeep) std::string().swap(s);
    }
  };
  trim(request_.keys);
  trim(request_.values);
}

// What a half-received request holds, its blob's spare capacity included: the server's memory
// budget counts what is allocated, not only what arrived.
std::size_t Decoder::buffered() const {
  if (!in_request_) return 0;
  const std::size_t spare =
      field_ == Field::kBytes && blob_ != nullptr ? blob_->capacity() - blob_->size() : 0;
  return held_ + spare;
}

Decoder::Step Decoder::Decode(std::span<const std::uint8_t> input) {
  // After one malformed byte nothing later can be trusted to start a request: the connection
  // is done.
  if (dead_) return {Status::kMalformed, 0};
  std::size_t used = 0;
  if (!dialect_) {
    // Dialect detection (spec section 9).  Bytes that match the v2 preamble so far are held
    // back; the first mismatching byte decides v1 and is left in the input for Parse.
    while (used < input.size() && !dialect_) {
      const std::uint8_t byte = input[used];
      if (byte == kV2Preamble[preamble_len_]) {
        preamble_[preamble_len_++] = byte;
        ++used;
        if (preamble_len_ == kV2Preamble.size()) dialect_ = Dialect::kV2;
      } else {
        dialect_ = Dialect::kV1;
      }
    }
    if (!dialect_) {
      consumed_ += used;
      return {Status::kNeedMore, used};
    }
  }
  Status status = Status::kNeedMore;
  if (preamble_parsed_ < preamble_len_) {
    std::size_t n = 0;
    status = Parse(preamble_ + preamble_parsed_, preamble_len_ - preamble_parsed_, n);
    preamble_parsed_ = static_cast<std::uint8_t>(preamble_parsed_ + n);
  }
  if (status == Status::kNeedMore) {
    std::size_t n = 0;
    status = Parse(input.data() + used, input.size() - used, n);
    used += n;
  }
  consumed_ += used;
  return {status, used};
}

Decoder::Status Decoder::Parse(const std::uint8_t* data, std::size_t size, std::size_t& used) {
  used = 0;
  while (used < size) {
    Status status = Status::kNeedMore;
    if (field_ == Field::kQuery) {
      field_offset_ = parsed_;
      const std::uint8_t code = data[used];
      ++used;
      ++parsed_;
      status = StartRequest(code);
    } else if (field_ == Field::kBytes) {
      // A blob is copied as it arrives, never waited for whole: its size was checked against
      // the limits before the first byte.
      const std::size_t take =
          static_cast<std::size_t>(std::min<std::uint64_t>(blob_left_, size - used));
      blob_->append(reinterpret_cast<const char*>(data + used), take);
      held_ += take;
      used += take;
      parsed_ += take;
      blob_left_ -= take;
      if (blob_left_ == 0) status = NextField();
    } else {
      const std::size_t take = std::min<std::size_t>(fixed_need_ - fixed_have_, size - used);
      std::memcpy(fixed_ + fixed_have_, data + used, take);
      fixed_have_ = static_cast<std::uint8_t>(fixed_have_ + take);
      used += take;
      parsed_ += take;
      if (fixed_have_ == fixed_need_) status = FixedFieldDone();
    }
    if (status != Status::kNeedMore) return status;
  }
  return Status::kNeedMore;
}

Decoder::Status Decoder::StartRequest(std::uint8_t code) {
  const auto row = LookupCode(*dialect_, code);
  if (!row) {
    return Fail(field_offset_, "unknown query code " + Hex8(code) + " (" +
                                   std::string(DialectName(*dialect_)) + " dialect)");
  }
  // VALIDATE only opens a connection, and a torch 2.x connection must open with it: anything
  // else is not torch's client, and is refused before it can touch a key.
  if (row->op == Op::kValidate && requests_ > 0) {
    return Fail(field_offset_, "VALIDATE is only allowed as the first message of a connection");
  }
  if (*dialect_ == Dialect::kV2 && requests_ == 0 && row->op != Op::kValidate) {
    return Fail(field_offset_,
                "a torch 2.x connection must open with VALIDATE, not " + std::string(row->name));
  }
  request_.op = row->op;
  // clear(), not a new Request: the strings keep their buffers (TrimRequest bounds them).
  request_.keys.clear();
  request_.values.clear();
  request_.delta = 0;
  request_.word = 0;
  have_count_ = have_delta_ = have_word_ = false;
  count_ = 0;
  request_bytes_ = 0;
  held_ = 0;
  in_request_ = true;
  return NextField();
}

Decoder::Status Decoder::Want(Field field) {
  Expect(field);
  return Status::kNeedMore;
}

void Decoder::Expect(Field field) {
  field_ = field;
  field_offset_ = parsed_;
  fixed_have_ = 0;
  fixed_need_ = field == Field::kU32 ? 4 : 8;
}

// Decides the next field of the current request from what it holds so far, or completes it.
Decoder::Status Decoder::NextField() {
  const auto& keys = request_.keys;
  const auto& values = request_.values;
  switch (request_.op) {
    case Op::kSet:
    case Op::kAppend:
    case Op::kQueuePush:
      if (keys.empty()) return Want(Field::kKeyLen);
      if (values.empty()) return Want(Field::kValueLen);
      break;
    case Op::kCompareSet:
      if (keys.empty()) return Want(Field::kKeyLen);
      if (values.size() < 2) return Want(Field::kValueLen);
      break;
    case Op::kGet:
    case Op::kDeleteKey:
    case Op::kWatchKey:
    case Op::kQueuePop:
    case Op::kQueueLen:
      if (keys.empty()) return Want(Field::kKeyLen);
      break;
    case Op::kAdd:
      if (keys.empty()) return Want(Field::kKeyLen);
      if (!have_delta_) return Want(Field::kI64);
      break;
    case Op::kCheck:
    case Op::kWait:
    case Op::kMultiGet:
      if (!have_count_) return Want(Field::kCount);
      if (keys.size() < count_) return Want(Field::kKeyLen);
      break;
    case Op::kMultiSet:
      if (!have_count_) return Want(Field::kCount);
      if (values.size() < keys.size()) return Want(Field::kValueLen);
      if (keys.size() < count_) return Want(Field::kKeyLen);
      break;
    case Op::kValidate:
    case Op::kPing:
      if (!have_word_) return Want(Field::kU32);
      break;
    case Op::kGetNumKeys:
    case Op::kCancelWait:
    case Op::kList:
      break;
  }
  in_request_ = false;
  ++requests_;
  Expect(Field::kQuery);
  return Status::kRequest;
}

Decoder::Status Decoder::FixedFieldDone() {
  switch (field_) {
    case Field::kCount: {
      const std::uint64_t n = LoadU64(fixed_);
      // Checked before any key is read, so a huge count costs nothing but this line.
      if (n > limits_.max_keys_per_request) {
        return Fail(field_offset_, std::string(OpName(request_.op)) + " with " + std::to_string(n) +
                                       " keys exceeds the limit of " +
                                       std::to_string(limits_.max_keys_per_request) +
                                       " keys per request");
      }
      count_ = n;
      have_count_ = true;
      return NextField();
    }
    case Field::kKeyLen:
      return BlobLengthDone(true, LoadU64(fixed_));
    case Field::kValueLen:
      return BlobLengthDone(false, LoadU64(fixed_));
    case Field::kI64:
      request_.delta = static_cast<std::int64_t>(LoadU64(fixed_));
      have_delta_ = true;
      return NextField();
    case Field::kU32:
      request_.word = LoadU32(fixed_);
      have_word_ = true;
      if (request_.op == Op::kValidate && request_.word != kValidateMagic) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "VALIDATE magic 0x%08X is not 0x%08X", request_.word,
                      kValidateMagic);
        return Fail(field_offset_, buf);
      }
      return NextField();
    case Field::kQuery:
    case Field::kBytes:
      break;
  }
  return Fail(field_offset_, "internal decoder state error");
}

Decoder::Status Decoder::BlobLengthDone(bool is_key, std::uint64_t length) {
  // Keys: the limit plus the '/' torch's client puts in front (saturating).
  const std::size_t limit =
      is_key
          ? limits_.max_key_size + std::min(kClientKeyPrefixSize, SIZE_MAX - limits_.max_key_size)
          : limits_.max_value_size;
  const char* what = is_key ? "key" : "value";
  if (length > limit) {
    return Fail(
        field_offset_,
        std::string(OpName(request_.op)) + " " + what + " length " + std::to_string(length) +
            " exceeds the limit of " + std::to_string(limit) + " bytes" +
            (is_key ? " (" + std::to_string(limits_.max_key_size) + " and the client's '/' prefix)"
                    : std::string()));
  }
  // Subtracted, not added: request_bytes_ never exceeds the limit, and length + request_bytes_
  // could wrap around for a hostile length.
  if (length > limits_.max_request_size - request_bytes_) {
    return Fail(field_offset_, std::string(OpName(request_.op)) + " request of more than " +
                                   std::to_string(limits_.max_request_size) +
                                   " bytes exceeds the request size limit");
  }
  request_bytes_ += length;
  auto& list = is_key ? request_.keys : request_.values;
  list.emplace_back();
  if (length == 0) return NextField();
  blob_ = &list.back();
  blob_left_ = length;
  field_ = Field::kBytes;
  field_offset_ = parsed_;
  return Status::kNeedMore;
}

Decoder::Status Decoder::Fail(std::uint64_t offset, std::string reason) {
  dead_ = true;
  malformed_.offset = offset;
  malformed_.reason = std::move(reason);
  return Status::kMalformed;
}

// ---- encoding ----

void AppendU8(std::string& out, std::uint8_t value) { out.push_back(static_cast<char>(value)); }

// Little-endian byte by byte, whatever the host's order: the wire is torch's x86 layout.
void AppendU32(std::string& out, std::uint32_t value) {
  char buf[4];
  for (int i = 0; i < 4; ++i) buf[i] = static_cast<char>((value >> (8 * i)) & 0xFF);
  out.append(buf, 4);
}

void AppendU64(std::string& out, std::uint64_t value) {
  char buf[8];
  for (int i = 0; i < 8; ++i) buf[i] = static_cast<char>((value >> (8 * i)) & 0xFF);
  out.append(buf, 8);
}

void AppendI64(std::string& out, std::int64_t value) {
  AppendU64(out, static_cast<std::uint64_t>(value));
}

void AppendBlob(std::string& out, std::string_view bytes) {
  AppendU64(out, bytes.size());
  out.append(bytes);
}

// ---- ValueLedger and Reply ----

// A value shared by many replies (every rank's GET of one key) counts once: the ledger counts
// bytes per distinct value, not per reply.
void ValueLedger::Pin(const std::string* value) {
  if (pins_[value]++ == 0) bytes_ += value->size();
}

void ValueLedger::Unpin(const std::string* value) {
  auto it = pins_.find(value);
  if (it == pins_.end()) return;
  if (--it->second == 0) {
    bytes_ -= value->size();
    pins_.erase(it);
  }
}

Reply::~Reply() { Clear(); }

Reply::Reply(Reply&& other) noexcept
    : ledger_(other.ledger_),
      pieces_(std::move(other.pieces_)),
      head_(other.head_),
      front_offset_(other.front_offset_),
      size_(other.size_),
      own_(other.own_) {
  other.pieces_.clear();
  other.head_ = other.front_offset_ = other.size_ = other.own_ = 0;
}

Reply& Reply::operator=(Reply&& other) noexcept {
  if (this == &other) return *this;
  Clear();
  ledger_ = other.ledger_;
  pieces_ = std::move(other.pieces_);
  head_ = other.head_;
  front_offset_ = other.front_offset_;
  size_ = other.size_;
  own_ = other.own_;
  other.pieces_.clear();
  other.head_ = other.front_offset_ = other.size_ = other.own_ = 0;
  return *this;
}

Reply Reply::Clone() const {
  Reply copy;
  for (std::size_t i = head_; i < pieces_.size(); ++i) {
    Piece piece = pieces_[i];
    if (i == head_ && front_offset_ > 0) {
      piece = Piece{std::string(piece.view().substr(front_offset_)), nullptr};
    }
    copy.Push(std::move(piece));
  }
  return copy;
}

void Reply::Append(std::string_view bytes) {
  if (bytes.empty()) return;
  size_ += bytes.size();
  own_ += bytes.size();
  if (pieces_.size() > head_ && !pieces_.back().value) {
    pieces_.back().bytes.append(bytes);
    return;
  }
  pieces_.push_back(Piece{std::string(bytes), nullptr});
}

void Reply::AppendValue(const SharedValue& value) {
  if (!value || value->empty()) return;
  // Small values are copied (a pointer and a pin cost more than the bytes); big ones are
  // shared with the store, so that a thousand GETs of one blob hold one copy.
  if (value->size() <= kCopyUpTo) {
    Append(*value);
    return;
  }
  Push(Piece{std::string(), value});
}

void Reply::AppendReply(Reply&& other) {
  for (std::size_t i = other.head_; i < other.pieces_.size(); ++i) {
    Piece& piece = other.pieces_[i];
    if (piece.value && other.ledger_ != nullptr) other.ledger_->Unpin(piece.value.get());
    if (i == other.head_ && other.front_offset_ > 0) {
      Append(piece.view().substr(other.front_offset_));
    } else if (piece.value) {
      Push(std::move(piece));
    } else {
      Append(piece.bytes);
    }
  }
  other.pieces_.clear();
  other.head_ = other.front_offset_ = other.size_ = other.own_ = 0;
}

void Reply::Push(Piece piece) {
  const std::size_t n = piece.view().size();
  if (n == 0) return;
  size_ += n;
  if (piece.value) {
    if (ledger_ != nullptr) ledger_->Pin(piece.value.get());
  } else {
    own_ += n;
  }
  pieces_.push_back(std::move(piece));
}

void Reply::Release(const Piece& piece) {
  if (piece.value) {
    if (ledger_ != nullptr) ledger_->Unpin(piece.value.get());
  } else {
    own_ -= piece.bytes.size();
  }
}

void Reply::Consume(std::size_t n) {
  n = std::min(n, size_);
  size_ -= n;
  while (n > 0) {
    const Piece& front = pieces_[head_];
    const std::size_t left = front.view().size() - front_offset_;
    if (n < left) {
      front_offset_ += n;
      break;
    }
    n -= left;
    // own_ counted the whole piece; Release takes it all off.
    Release(front);
    pieces_[head_] = Piece{};
    ++head_;
    front_offset_ = 0;
  }
  if (head_ == pieces_.size()) {
    pieces_.clear();  // keeps the capacity: the next reply needs no allocation
    head_ = 0;
  } else if (head_ >= 64 && head_ * 2 >= pieces_.size()) {  // compact only when it pays
    pieces_.erase(pieces_.begin(), pieces_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
}

std::size_t Reply::TakeAll(std::vector<Piece>& out) {
  const std::size_t offset = front_offset_;
  for (std::size_t i = head_; i < pieces_.size(); ++i) out.push_back(std::move(pieces_[i]));
  pieces_.clear();
  head_ = front_offset_ = size_ = own_ = 0;
  return offset;
}

void Reply::Clear() {
  for (std::size_t i = head_; i < pieces_.size(); ++i) Release(pieces_[i]);
  pieces_.clear();
  head_ = front_offset_ = size_ = own_ = 0;
}

std::string Reply::Flatten() const {
  std::string out;
  out.reserve(size_);
  for (std::size_t i = head_; i < pieces_.size(); ++i) {
    out.append(pieces_[i].view().substr(i == head_ ? front_offset_ : 0));
  }
  return out;
}

void AppendU8(Reply& out, std::uint8_t value) {
  const char c = static_cast<char>(value);
  out.Append(std::string_view(&c, 1));
}

void AppendU32(Reply& out, std::uint32_t value) {
  char buf[4];
  for (int i = 0; i < 4; ++i) buf[i] = static_cast<char>((value >> (8 * i)) & 0xFF);
  out.Append(std::string_view(buf, 4));
}

void AppendI64(Reply& out, std::int64_t value) {
  const auto u = static_cast<std::uint64_t>(value);
  char buf[8];
  for (int i = 0; i < 8; ++i) buf[i] = static_cast<char>((u >> (8 * i)) & 0xFF);
  out.Append(std::string_view(buf, 8));
}

void AppendBlob(Reply& out, std::string_view bytes) {
  AppendI64(out, static_cast<std::int64_t>(bytes.size()));
  out.Append(bytes);
}

void AppendBlob(Reply& out, const SharedValue& value) {
  AppendI64(out, static_cast<std::int64_t>(value ? value->size() : 0));
  out.AppendValue(value);
}

std::uint64_t LoadU64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::uint32_t LoadU32(const std::uint8_t* p) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

bool EncodeRequest(Dialect dialect, const Request& request, std::string& out) {
  const auto row = LookupOp(dialect, request.op);
  if (!row) return false;
  AppendU8(out, row->code);
  const auto& keys = request.keys;
  const auto& values = request.values;
  switch (request.op) {
    case Op::kValidate:
    case Op::kPing:
      AppendU32(out, request.word);
      break;
    case Op::kSet:
    case Op::kAppend:
    case Op::kQueuePush:
      AppendBlob(out, At(keys, 0));
      AppendBlob(out, At(values, 0));
      break;
    case Op::kCompareSet:
      AppendBlob(out, At(keys, 0));
      AppendBlob(out, At(values, 0));
      AppendBlob(out, At(values, 1));
      break;
    case Op::kGet:
    case Op::kDeleteKey:
    case Op::kWatchKey:
    case Op::kQueuePop:
    case Op::kQueueLen:
      AppendBlob(out, At(keys, 0));
      break;
    case Op::kAdd:
      AppendBlob(out, At(keys, 0));
      AppendI64(out, request.delta);
      break;
    case Op::kCheck:
    case Op::kWait:
    case Op::kMultiGet:
      AppendU64(out, keys.size());
      for (const auto& key : keys) AppendBlob(out, key);
      break;
    case Op::kMultiSet:
      AppendU64(out, keys.size());
      for (std::size_t i = 0; i < keys.size(); ++i) {
        AppendBlob(out, keys[i]);
        AppendBlob(out, At(values, i));
      }
      break;
    case Op::kGetNumKeys:
    case Op::kCancelWait:
    case Op::kList:
      break;
  }
  return true;
}

}  // namespace gculaunch::rendezvous
