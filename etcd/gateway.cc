#include "etcd/gateway.h"

#include <array>
#include <charconv>
#include <nlohmann/json.hpp>

namespace gculaunch::etcd {
namespace {

using nlohmann::json;

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  // The URL-safe alphabet too: the decoder accepts what any protobuf JSON writer may send.
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

Error Malformed(std::string_view call, const std::string& why) {
  return Error{"etcd's " + std::string(call) + " reply is malformed: " + why,
               "check that the endpoint is an etcd 3.4 or newer client URL"};
}

// Parses without exceptions: a discarded value means the text was not JSON.
Result<json> ParseObject(std::string_view body, std::string_view call) {
  json doc = json::parse(body.begin(), body.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    std::string start(body.substr(0, 80));  // enough to recognise a proxy's HTML page
    return Malformed(call, "not a JSON object: '" + start + "'");
  }
  return doc;
}

// A 64-bit integer field: a JSON string (protobuf's mapping of int64) or a number; absent
// means 0 (protobuf leaves default values out).
Result<std::int64_t> Int(const json& obj, const char* field, std::string_view call) {
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return std::int64_t{0};
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (it->is_string()) {
    const auto& text = it->get_ref<const std::string&>();
    std::int64_t out = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    if (ec == std::errc() && end == text.data() + text.size() && !text.empty()) return out;
  }
  return Malformed(call,
                   std::string("field '") + field + "' is not a 64-bit integer: " + it->dump());
}

// Absent is false: protobuf's JSON leaves out fields at their default.
bool Bool(const json& obj, const char* field) {
  auto it = obj.find(field);
  return it != obj.end() && it->is_boolean() && it->get<bool>();
}

std::string String(const json& obj, const char* field) {
  auto it = obj.find(field);
  if (it == obj.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

Result<std::string> Bytes(const json& obj, const char* field, std::string_view call) {
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return std::string();
  if (!it->is_string()) return Malformed(call, std::string("field '") + field + "' is no string");
  auto decoded = Base64Decode(it->get_ref<const std::string&>());
  if (!decoded.ok()) {
    return Malformed(call, std::string("field '") + field + "': " + decoded.error().what);
  }
  return decoded;
}

// An absent object reads as an empty one, whose fields then take their defaults, as protobuf
// means it.
const json& Member(const json& obj, const char* field) {
  static const json kEmpty = json::object();
  auto it = obj.find(field);
  return it != obj.end() && it->is_object() ? *it : kEmpty;
}

Result<std::int64_t> HeaderRevision(const json& obj, std::string_view call) {
  return Int(Member(obj, "header"), "revision", call);
}

Result<KeyValue> ParseKv(const json& obj, std::string_view call) {
  KeyValue kv;
  auto key = Bytes(obj, "key", call);
  if (!key.ok()) return key.error();
  auto value = Bytes(obj, "value", call);
  if (!value.ok()) return value.error();
  kv.key = std::move(*key);
  kv.value = std::move(*value);
  std::array<std::pair<const char*, std::int64_t*>, 4> ints{{
      {"create_revision", &kv.create_revision},
      {"mod_revision", &kv.mod_revision},
      {"version", &kv.version},
      {"lease", &kv.lease},
  }};
  for (auto& [field, out] : ints) {
    auto n = Int(obj, field, call);
    if (!n.ok()) return n.error();
    *out = *n;
  }
  return kv;
}

Result<RangeResponse> RangeFrom(const json& obj, std::string_view call) {
  RangeResponse out;
  auto revision = HeaderRevision(obj, call);
  if (!revision.ok()) return revision.error();
  auto count = Int(obj, "count", call);
  if (!count.ok()) return count.error();
  out.revision = *revision;
  out.count = *count;
  out.more = Bool(obj, "more");
  auto kvs = obj.find("kvs");
  if (kvs != obj.end() && kvs->is_array()) {
    for (const auto& item : *kvs) {
      auto kv = ParseKv(item, call);
      if (!kv.ok()) return kv.error();
      out.kvs.push_back(std::move(*kv));
    }
  }
  return out;
}

const char* TargetName(CompareTarget target) {
  switch (target) {
    case CompareTarget::kVersion:
      return "VERSION";
    case CompareTarget::kCreateRevision:
      return "CREATE";
    case CompareTarget::kModRevision:
      return "MOD";
    case CompareTarget::kValue:
      return "VALUE";
    case CompareTarget::kLease:
      return "LEASE";
  }
  return "VERSION";
}

const char* OpName(CompareOp op) {
  switch (op) {
    case CompareOp::kEqual:
      return "EQUAL";
    case CompareOp::kGreater:
      return "GREATER";
    case CompareOp::kLess:
      return "LESS";
    case CompareOp::kNotEqual:
      return "NOT_EQUAL";
  }
  return "EQUAL";
}

json CompareJson(const Compare& c) {
  json out{
      {"key", Base64Encode(c.key)}, {"target", TargetName(c.target)}, {"result", OpName(c.op)}};
  // int64 as a JSON string, protobuf's mapping: a JSON number loses precision above 2^53.
  const std::string number = std::to_string(c.number);
  switch (c.target) {
    case CompareTarget::kVersion:
      out["version"] = number;
      break;
    case CompareTarget::kCreateRevision:
      out["create_revision"] = number;
      break;
    case CompareTarget::kModRevision:
      out["mod_revision"] = number;
      break;
    case CompareTarget::kValue:
      out["value"] = Base64Encode(c.value);
      break;
    case CompareTarget::kLease:
      out["lease"] = number;
      break;
  }
  return out;
}

json RangeJson(std::string_view key, std::string_view range_end) {
  json out{{"key", Base64Encode(key)}};
  if (!range_end.empty()) out["range_end"] = Base64Encode(range_end);
  return out;
}

json PutJson(std::string_view key, std::string_view value, std::int64_t lease) {
  json out{{"key", Base64Encode(key)}, {"value", Base64Encode(value)}};
  if (lease != 0) out["lease"] = std::to_string(lease);
  return out;
}

json OpJson(const RequestOp& op) {
  switch (op.kind) {
    case RequestOp::Kind::kRange:
      return json{{"request_range", RangeJson(op.key, op.range_end)}};
    case RequestOp::Kind::kPut:
      return json{{"request_put", PutJson(op.key, op.value, op.lease)}};
    case RequestOp::Kind::kDelete:
      return json{{"request_delete_range", RangeJson(op.key, op.range_end)}};
  }
  return json::object();
}

json OpsJson(const std::vector<RequestOp>& ops) {
  json out = json::array();
  for (const auto& op : ops) out.push_back(OpJson(op));
  return out;
}

Result<ResponseOp> ResponseOpFrom(const json& item) {
  ResponseOp out;
  if (auto it = item.find("response_range"); it != item.end() && it->is_object()) {
    auto range = RangeFrom(*it, "txn");
    if (!range.ok()) return range.error();
    out.kind = RequestOp::Kind::kRange;
    out.range = std::move(*range);
  } else if (auto put = item.find("response_put"); put != item.end()) {  // may be {} or null
    out.kind = RequestOp::Kind::kPut;
  } else if (auto del = item.find("response_delete_range"); del != item.end() && del->is_object()) {
    auto deleted = Int(*del, "deleted", "txn");
    if (!deleted.ok()) return deleted.error();
    out.kind = RequestOp::Kind::kDelete;
    out.deleted = *deleted;
  } else {
    return Malformed("txn", "an entry of 'responses' is no range, put or delete: " + item.dump());
  }
  return out;
}

Result<Event> EventFrom(const json& item) {
  Event out;
  // PUT is the enum's default, which the gateway leaves out.
  out.type = String(item, "type") == "DELETE" ? Event::Type::kDelete : Event::Type::kPut;
  auto kv = ParseKv(Member(item, "kv"), "watch");
  if (!kv.ok()) return kv.error();
  out.kv = std::move(*kv);
  return out;
}

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const auto b0 = static_cast<unsigned char>(bytes[i]);
    const auto b1 = static_cast<unsigned char>(bytes[i + 1]);
    const auto b2 = static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[b0 >> 2];
    out += kAlphabet[((b0 & 0x3) << 4) | (b1 >> 4)];
    out += kAlphabet[((b1 & 0xf) << 2) | (b2 >> 6)];
    out += kAlphabet[b2 & 0x3f];
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    const auto b0 = static_cast<unsigned char>(bytes[i]);
    const unsigned b1 = rest > 1 ? static_cast<unsigned char>(bytes[i + 1]) : 0U;
    out += kAlphabet[b0 >> 2];
    out += kAlphabet[((b0 & 0x3) << 4) | (b1 >> 4)];
    out += rest > 1 ? kAlphabet[(b1 & 0xf) << 2] : '=';
    out += '=';
  }
  return out;
}

Result<std::string> Base64Decode(std::string_view text) {
  // Padding is optional on input (some writers leave it out); the bit count below still
  // catches a truncated text.
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  std::string out;
  out.reserve(text.size() * 3 / 4);
  unsigned acc = 0;
  int bits = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const int v = Base64Value(text[i]);
    if (v < 0) {
      return Error{
          "not base64: byte " + std::to_string(i) + " is '" + std::string(1, text[i]) + "'", ""};
    }
    acc = (acc << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  if (bits >= 6) return Error{"not base64: " + std::to_string(text.size()) + " symbols", ""};
  return out;
}

// etcd's range end for "every key that starts with prefix": the prefix with its last byte
// that can be raised raised by one; "\0" (every key) when no byte can be.
std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

// A key that does not exist has create_revision 0: the one test for absence etcd offers.
Compare Compare::Missing(std::string key) {
  return Compare{std::move(key), CompareTarget::kCreateRevision, CompareOp::kEqual, 0, ""};
}
Compare Compare::CreatedAt(std::string key, std::int64_t revision) {
  return Compare{std::move(key), CompareTarget::kCreateRevision, CompareOp::kEqual, revision, ""};
}
Compare Compare::ModifiedAt(std::string key, std::int64_t revision) {
  return Compare{std::move(key), CompareTarget::kModRevision, CompareOp::kEqual, revision, ""};
}

RequestOp RequestOp::Get(std::string key) {
  return RequestOp{Kind::kRange, std::move(key), "", "", 0};
}
RequestOp RequestOp::GetPrefix(const std::string& prefix) {
  return RequestOp{Kind::kRange, prefix, PrefixEnd(prefix), "", 0};
}
RequestOp RequestOp::Put(std::string key, std::string value, std::int64_t lease) {
  return RequestOp{Kind::kPut, std::move(key), "", std::move(value), lease};
}
RequestOp RequestOp::Delete(std::string key) {
  return RequestOp{Kind::kDelete, std::move(key), "", "", 0};
}
RequestOp RequestOp::DeletePrefix(const std::string& prefix) {
  return RequestOp{Kind::kDelete, prefix, PrefixEnd(prefix), "", 0};
}

std::string RangeBody(std::string_view key, std::string_view range_end, std::int64_t revision) {
  json out = RangeJson(key, range_end);
  if (revision != 0) out["revision"] = std::to_string(revision);
  return out.dump();
}

std::string PutBody(std::string_view key, std::string_view value, std::int64_t lease) {
  return PutJson(key, value, lease).dump();
}

std::string DeleteBody(std::string_view key, std::string_view range_end) {
  return RangeJson(key, range_end).dump();
}

std::string TxnBody(const TxnRequest& txn) {
  json compare = json::array();
  for (const auto& c : txn.compare) compare.push_back(CompareJson(c));
  return json{
      {"compare", compare}, {"success", OpsJson(txn.success)}, {"failure", OpsJson(txn.failure)}}
      .dump();
}

std::string LeaseGrantBody(std::int64_t ttl_seconds) {
  return json{{"TTL", std::to_string(ttl_seconds)}}.dump();
}

std::string LeaseIdBody(std::int64_t id) { return json{{"ID", std::to_string(id)}}.dump(); }

std::string CompactBody(std::int64_t revision) {
  return json{{"revision", std::to_string(revision)}}.dump();
}

std::string AuthenticateBody(std::string_view user, std::string_view password) {
  return json{{"name", user}, {"password", password}}.dump();
}

std::string WatchCreateBody(std::string_view key, std::string_view range_end,
                            std::int64_t start_revision, bool prev_kv) {
  json create = RangeJson(key, range_end);
  if (start_revision != 0) create["start_revision"] = std::to_string(start_revision);
  if (prev_kv) create["prev_kv"] = true;
  return json{{"create_request", create}}.dump();
}

std::optional<GatewayError> ParseGatewayError(std::string_view body) {
  json doc = json::parse(body.begin(), body.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return std::nullopt;
  // Unary errors are {"error": "...", "message": "...", "code": N}; a streamed call's are
  // {"error": {"grpc_code": N, "message": "..."}}.
  auto it = doc.find("error");
  if (it == doc.end()) return std::nullopt;
  GatewayError out;
  const json& holder = it->is_object() ? *it : doc;
  if (auto code = holder.find("code"); code != holder.end() && code->is_number_integer()) {
    out.code = code->get<int>();
  } else if (auto grpc = holder.find("grpc_code"); grpc != holder.end() && grpc->is_number()) {
    out.code = grpc->get<int>();
  }
  out.message = String(holder, "message");
  if (out.message.empty() && it->is_string()) out.message = it->get<std::string>();
  if (out.message.empty()) out.message = "unknown error";
  return out;
}

Result<RangeResponse> ParseRange(std::string_view body) {
  auto doc = ParseObject(body, "range");
  if (!doc.ok()) return doc.error();
  return RangeFrom(*doc, "range");
}

Result<PutResponse> ParsePut(std::string_view body) {
  auto revision = ParseHeaderRevision(body, "put");
  if (!revision.ok()) return revision.error();
  return PutResponse{*revision};
}

Result<DeleteResponse> ParseDelete(std::string_view body) {
  auto doc = ParseObject(body, "delete");
  if (!doc.ok()) return doc.error();
  auto revision = HeaderRevision(*doc, "delete");
  if (!revision.ok()) return revision.error();
  auto deleted = Int(*doc, "deleted", "delete");
  if (!deleted.ok()) return deleted.error();
  return DeleteResponse{*revision, *deleted};
}

Result<TxnResponse> ParseTxn(std::string_view body) {
  auto doc = ParseObject(body, "txn");
  if (!doc.ok()) return doc.error();
  TxnResponse out;
  auto revision = HeaderRevision(*doc, "txn");
  if (!revision.ok()) return revision.error();
  out.revision = *revision;
  // A failed transaction is `succeeded: false`, the default, which the gateway leaves out.
  out.succeeded = Bool(*doc, "succeeded");
  auto responses = doc->find("responses");
  if (responses != doc->end() && responses->is_array()) {
    for (const auto& item : *responses) {
      auto op = ResponseOpFrom(item);
      if (!op.ok()) return op.error();
      out.responses.push_back(std::move(*op));
    }
  }
  return out;
}

Result<Lease> ParseLeaseGrant(std::string_view body) {
  auto doc = ParseObject(body, "lease grant");
  if (!doc.ok()) return doc.error();
  auto id = Int(*doc, "ID", "lease grant");
  if (!id.ok()) return id.error();
  auto ttl = Int(*doc, "TTL", "lease grant");
  if (!ttl.ok()) return ttl.error();
  // Lease 0 means "no lease" to etcd: keys put with it would not expire with this process.
  if (*id == 0) return Malformed("lease grant", "no lease ID");
  return Lease{*id, *ttl};
}

Result<KeepAliveResponse> ParseKeepAlive(std::string_view body) {
  auto doc = ParseObject(body, "lease keepalive");
  if (!doc.ok()) return doc.error();
  // Keepalive is a streamed call: its one message comes wrapped in "result".
  const json& result = doc->contains("result") ? Member(*doc, "result") : *doc;
  auto ttl = Int(result, "TTL", "lease keepalive");
  if (!ttl.ok()) return ttl.error();
  // An expired or revoked lease answers 200 with the TTL left out (0, its default).
  if (*ttl <= 0) return KeepAliveResponse{true, 0};
  return KeepAliveResponse{false, *ttl};
}

Result<std::int64_t> ParseHeaderRevision(std::string_view body, std::string_view call) {
  auto doc = ParseObject(body, call);
  if (!doc.ok()) return doc.error();
  return HeaderRevision(*doc, call);
}

Result<std::string> ParseAuthenticate(std::string_view body) {
  auto doc = ParseObject(body, "authenticate");
  if (!doc.ok()) return doc.error();
  std::string token = String(*doc, "token");
  if (token.empty()) return Malformed("authenticate", "no token");
  return token;
}

Result<WatchMessage> ParseWatchLine(std::string_view line) {
  auto doc = ParseObject(line, "watch");
  if (!doc.ok()) return doc.error();
  // An error arrives as a line of the stream, not as an HTTP status: the stream is already 200.
  if (auto error = ParseGatewayError(line)) {
    return Error{
        "etcd ended the watch: " + error->message + " (code " + std::to_string(error->code) + ")",
        ""};
  }
  const json& result = Member(*doc, "result");
  WatchMessage out;
  auto revision = HeaderRevision(result, "watch");
  if (!revision.ok()) return revision.error();
  auto watch_id = Int(result, "watch_id", "watch");
  if (!watch_id.ok()) return watch_id.error();
  auto compact = Int(result, "compact_revision", "watch");
  if (!compact.ok()) return compact.error();
  out.revision = *revision;
  out.watch_id = *watch_id;
  out.compact_revision = *compact;
  out.created = Bool(result, "created");
  out.canceled = Bool(result, "canceled");
  out.cancel_reason = String(result, "cancel_reason");
  if (auto events = result.find("events"); events != result.end() && events->is_array()) {
    for (const auto& item : *events) {
      auto event = EventFrom(item);
      if (!event.ok()) return event.error();
      out.events.push_back(std::move(*event));
    }
  }
  return out;
}

Result<VersionInfo> ParseVersion(std::string_view body) {
  auto doc = ParseObject(body, "version");
  if (!doc.ok()) return doc.error();
  VersionInfo out{String(*doc, "etcdserver"), String(*doc, "etcdcluster")};
  // Any HTTP server answers /version; only etcd names its server version.
  if (out.server.empty()) return Malformed("version", "no 'etcdserver' field");
  return out;
}

}  // namespace gculaunch::etcd
