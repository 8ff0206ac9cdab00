// Tests of rendezvous/codec.h: round trips of every opcode in both dialects, dialect
// detection, the incremental property, malformed and over-limit inputs, and a bounded
// random-input run.
#include "rendezvous/codec.h"

#include <catch2/catch.hpp>
#include <random>
#include <set>

#include "tests/rendezvous/decode_util.h"

namespace gculaunch::rendezvous {
namespace {

using testing::DecodeBytewise;
using testing::DecodeRandomSplits;
using testing::DecodeWhole;
using testing::Encode;
using testing::FromHex;
using testing::Req;

const std::string kHandshake = FromHex("00cef7853c");

// A representative request for every op, with the fields the op carries.
Request Sample(Op op) {
  switch (op) {
    case Op::kValidate:
      return Req(op, {}, {}, 0, kValidateMagic);
    case Op::kSet:
      return Req(op, {"/key1"}, {"value1"});
    case Op::kCompareSet:
      return Req(op, {"/cs"}, {"expected", "desired"});
    case Op::kGet:
    case Op::kWatchKey:
    case Op::kDeleteKey:
      return Req(op, {"/some/key"});
    case Op::kAdd:
      return Req(op, {"/counter"}, {}, -10);
    case Op::kCheck:
    case Op::kWait:
    case Op::kMultiGet:
      return Req(op, {"/a", "", std::string("/bin\0\xff", 6)});
    case Op::kMultiSet:
      return Req(op, {"/m1", "/m2"}, {"one", ""});
    case Op::kAppend:
    case Op::kQueuePush:
      return Req(op, {"/q"}, {std::string("\x00\x01\x02", 3)});
    case Op::kQueuePop:
    case Op::kQueueLen:
      return Req(op, {"/q"});
    case Op::kPing:
      return Req(op, {}, {}, 0, 13681);
    case Op::kGetNumKeys:
    case Op::kCancelWait:
    case Op::kList:
      return Req(op);
  }
  return Req(op);
}

TEST_CASE("opcode tables are consistent and document every code", "[codec]") {
  for (Dialect dialect : {Dialect::kV1, Dialect::kV2}) {
    std::set<int> codes;
    std::set<int> ops;
    for (const OpcodeInfo& row : Opcodes(dialect)) {
      INFO("code " << int(row.code));
      CHECK(codes.insert(row.code).second);
      CHECK(ops.insert(static_cast<int>(row.op)).second);
      CHECK(!row.name.empty());
      CHECK(!row.versions.empty());
      CHECK(row.spec.starts_with("5 "));  // docs/tcpstore-protocol.md section 5
      CHECK(LookupCode(dialect, row.code)->op == row.op);
      CHECK(LookupOp(dialect, row.op)->code == row.code);
    }
    // Codes are contiguous from 0.
    CHECK(*codes.begin() == 0);
    CHECK(*codes.rbegin() == static_cast<int>(codes.size()) - 1);
  }
  // The same byte means different things (spec section 3).
  CHECK(LookupCode(Dialect::kV1, 0)->op == Op::kSet);
  CHECK(LookupCode(Dialect::kV2, 0)->op == Op::kValidate);
  CHECK(LookupCode(Dialect::kV1, 5)->op == Op::kWait);
  CHECK(LookupCode(Dialect::kV2, 6)->op == Op::kWait);
  CHECK(LookupCode(Dialect::kV1, 7)->op == Op::kWatchKey);
  CHECK(LookupCode(Dialect::kV2, 7)->op == Op::kGetNumKeys);
  CHECK(LookupCode(Dialect::kV1, 8)->op == Op::kDeleteKey);
  CHECK(LookupCode(Dialect::kV2, 8)->op == Op::kDeleteKey);
  CHECK(LookupCode(Dialect::kV2, 13)->op == Op::kPing);
  CHECK_FALSE(LookupCode(Dialect::kV1, 9).has_value());
  CHECK_FALSE(LookupCode(Dialect::kV2, 18).has_value());
  CHECK_FALSE(LookupOp(Dialect::kV1, Op::kPing).has_value());
}

TEST_CASE("every opcode round-trips through encoder and decoder in both dialects", "[codec]") {
  for (Dialect dialect : {Dialect::kV1, Dialect::kV2}) {
    for (const OpcodeInfo& row : Opcodes(dialect)) {
      INFO("dialect v" << (dialect == Dialect::kV1 ? 1 : 2) << " op " << row.name);
      const Request original = Sample(row.op);
      const std::string bytes = Encode(dialect, original);
      REQUIRE(!bytes.empty());
      CHECK(static_cast<std::uint8_t>(bytes[0]) == row.code);
      // A v2 connection must open with VALIDATE; the decoder then sees the v2 preamble.
      const bool needs_handshake = dialect == Dialect::kV2 && row.op != Op::kValidate;
      const std::string stream = (needs_handshake ? kHandshake : std::string()) + bytes;
      for (const auto& decoded : {DecodeWhole(stream), DecodeBytewise(stream)}) {
        REQUIRE_FALSE(decoded.malformed);
        CHECK_FALSE(decoded.mid_request);
        REQUIRE(decoded.requests.size() == (needs_handshake ? 2u : 1u));
        CHECK(decoded.requests.back() == original);
        CHECK(decoded.dialect == dialect);
      }
    }
  }
}

TEST_CASE("encoder produces the spec's example bytes", "[codec]") {
  // Spec section 2: store.set("key1", "value1") from torch 1.13.
  CHECK(testing::ToHex(Encode(Dialect::kV1, Req(Op::kSet, {"/key1"}, {"value1"}))) ==
        "0005000000000000002f6b657931060000000000000076616c756531");
  // Traces: ADD init/ +1 in both dialects, the 2.6 handshake, WAIT with no keys.
  CHECK(testing::ToHex(Encode(Dialect::kV1, Req(Op::kAdd, {"init/"}, {}, 1))) ==
        "030500000000000000696e69742f0100000000000000");
  CHECK(testing::ToHex(Encode(Dialect::kV2, Req(Op::kAdd, {"init/"}, {}, 1))) ==
        "040500000000000000696e69742f0100000000000000");
  CHECK(testing::ToHex(Encode(Dialect::kV2, Req(Op::kValidate, {}, {}, 0, kValidateMagic)) +
                       Encode(Dialect::kV2, Req(Op::kPing, {}, {}, 0, 13681))) ==
        "00cef7853c0d71350000");
  CHECK(testing::ToHex(Encode(Dialect::kV1, Req(Op::kWait))) == "050000000000000000");
  // An op the dialect cannot express encodes to nothing.
  std::string out;
  CHECK_FALSE(EncodeRequest(Dialect::kV1, Req(Op::kPing), out));
  CHECK(out.empty());
}

TEST_CASE("reply encoders are little-endian", "[codec]") {
  std::string out;
  AppendI64(out, -2);
  CHECK(testing::ToHex(out) == "feffffffffffffff");
  out.clear();
  AppendU32(out, 13681);
  CHECK(testing::ToHex(out) == "71350000");
  out.clear();
  AppendBlob(out, "-2");
  CHECK(testing::ToHex(out) == "02000000000000002d32");
  const auto* p = reinterpret_cast<const std::uint8_t*>("\x71\x35\x00\x00\xfe\xff\xff\xff");
  CHECK(LoadU32(p) == 13681);
  CHECK(LoadU64(reinterpret_cast<const std::uint8_t*>("\xfe\xff\xff\xff\xff\xff\xff\xff")) ==
        static_cast<std::uint64_t>(-2));
}

TEST_CASE("dialect is decided lazily from the first bytes", "[codec]") {
  SECTION("a silent connection has no dialect") {
    Decoder d;
    CHECK(d.Decode(std::string_view()).status == Decoder::Status::kNeedMore);
    CHECK_FALSE(d.dialect().has_value());
    CHECK_FALSE(d.mid_request());
  }
  SECTION("a prefix of the v2 preamble is held back undecided") {
    for (std::size_t n = 1; n < 5; ++n) {
      Decoder partial;
      const auto step = partial.Decode(kHandshake.substr(0, n));
      CHECK(step.status == Decoder::Status::kNeedMore);
      CHECK(step.consumed == n);
      CHECK_FALSE(partial.dialect().has_value());
      CHECK(partial.mid_request());
    }
  }
  SECTION("the full preamble is v2 and yields VALIDATE") {
    const auto decoded = DecodeWhole(kHandshake);
    CHECK(decoded.dialect == Dialect::kV2);
    REQUIRE(decoded.requests.size() == 1);
    CHECK(decoded.requests[0] == Req(Op::kValidate, {}, {}, 0, kValidateMagic));
  }
  SECTION("a mismatch inside the preamble is v1, and the held bytes are parsed as v1") {
    // 00 CE F7 85 00 ...: v1 at the fifth byte, a SET whose key length prefix
    // (CE F7 85 00 00 00 00 FF) is far over the limit, reported at offset 1.
    const auto decoded = DecodeWhole(FromHex("00cef785000000000000ff"));
    CHECK(decoded.dialect == Dialect::kV1);
    REQUIRE(decoded.malformed);
    CHECK(decoded.error.offset == 1);
    CHECK_THAT(decoded.error.reason, Catch::Contains("SET key length"));
    // A v1 SET of an empty key, which starts 00 00: v1 at the second byte.
    const std::string set_empty = Encode(Dialect::kV1, Req(Op::kSet, {""}, {"v"}));
    const auto ok = DecodeBytewise(set_empty);
    CHECK(ok.dialect == Dialect::kV1);
    REQUIRE(ok.requests.size() == 1);
    CHECK(ok.requests[0] == Req(Op::kSet, {""}, {"v"}));
  }
  SECTION("a first byte other than 00 is v1 at once") {
    Decoder d;
    const auto step = d.Decode(FromHex("06"));
    CHECK(step.status == Decoder::Status::kRequest);
    CHECK(d.dialect() == Dialect::kV1);
    CHECK(d.request().op == Op::kGetNumKeys);
  }
}

// A long mixed stream of every op, for the split tests.
std::string MixedStream(Dialect dialect, std::vector<Request>* expected) {
  std::string stream;
  if (dialect == Dialect::kV2) {
    expected->push_back(Sample(Op::kValidate));
    stream += kHandshake;
  }
  for (int round = 0; round < 3; ++round) {
    for (const OpcodeInfo& row : Opcodes(dialect)) {
      if (row.op == Op::kValidate) continue;
      Request r = Sample(row.op);
      if (!r.keys.empty()) r.keys[0] += std::to_string(round);
      if (!r.values.empty()) r.values[0] += std::string(static_cast<std::size_t>(round * 97), 'x');
      expected->push_back(r);
      stream += Encode(dialect, r);
    }
  }
  return stream;
}

TEST_CASE("any split of the input gives the same requests", "[codec]") {
  for (Dialect dialect : {Dialect::kV1, Dialect::kV2}) {
    std::vector<Request> expected;
    const std::string stream = MixedStream(dialect, &expected);
    const auto whole = DecodeWhole(stream);
    REQUIRE_FALSE(whole.malformed);
    CHECK(whole.requests == expected);
    CHECK(DecodeBytewise(stream) == whole);
    for (std::uint32_t seed = 1; seed <= 50; ++seed) {
      INFO("seed " << seed);
      CHECK(DecodeRandomSplits(stream, seed) == whole);
    }
    // A stream that ends inside a request: every complete request, then "mid request".
    const std::string partial = Encode(dialect, Sample(Op::kCompareSet));
    for (std::size_t keep = 1; keep < partial.size(); ++keep) {
      const std::string cut_stream = stream + partial.substr(0, keep);
      const auto cut = DecodeWhole(cut_stream);
      CHECK(cut.mid_request);
      CHECK(cut.requests == expected);
      CHECK(DecodeBytewise(cut_stream) == cut);
    }
  }
}

TEST_CASE("consumed counts add up and pipelined requests come out one by one", "[codec]") {
  // The 1.13 trace's pipelined write: SET + GET + GETNUMKEYS in one chunk.
  const std::string chunk = FromHex(
      "000a000000000000002f706970656c696e6564010000000000000070"
      "020a000000000000002f706970656c696e6564"
      "06");
  Decoder d;
  std::string_view rest = chunk;
  std::vector<Op> ops;
  while (true) {
    const auto step = d.Decode(rest);
    rest.remove_prefix(step.consumed);
    if (step.status != Decoder::Status::kRequest) {
      CHECK(step.status == Decoder::Status::kNeedMore);
      break;
    }
    ops.push_back(d.request().op);
  }
  CHECK(ops == std::vector<Op>{Op::kSet, Op::kGet, Op::kGetNumKeys});
  CHECK(rest.empty());
  CHECK(d.consumed() == chunk.size());
  CHECK(d.requests() == 3);
}

TEST_CASE("a large value split over many reads is assembled exactly", "[codec]") {
  std::string value(8u << 20, '\0');
  for (std::size_t i = 0; i < value.size(); ++i) value[i] = static_cast<char>(i * 7919 % 251);
  const std::string stream = Encode(Dialect::kV1, Req(Op::kSet, {"/big"}, {value}));
  const auto decoded = testing::DecodeStream(
      stream, [](std::size_t left) { return std::min<std::size_t>(left, 1000); });
  REQUIRE(decoded.requests.size() == 1);
  CHECK(decoded.requests[0].values[0] == value);
}

struct BadCase {
  const char* name;
  std::string stream;
  std::uint64_t offset;
  const char* reason;
};

TEST_CASE("malformed and over-limit inputs are reported with offset and reason", "[codec]") {
  Limits small;
  small.max_key_size = 16;
  small.max_value_size = 32;
  small.max_keys_per_request = 4;
  small.max_request_size = 48;
  const std::string v2 = kHandshake;
  const std::vector<BadCase> cases = {
      {"v1 unknown code", FromHex("0909000000000000002f7768617465766572"), 0,
       "unknown query code 0x09 (torch 1.x dialect)"},
      {"v1 unknown code after a good request", FromHex("06") + FromHex("ff"), 1,
       "unknown query code 0xFF"},
      {"v2 unknown code", v2 + FromHex("ff"), 5, "unknown query code 0xFF (torch 2.x dialect)"},
      {"v2 VALIDATE again", v2 + v2, 5, "VALIDATE is only allowed as the first message"},
      {"key too long", Encode(Dialect::kV1, Req(Op::kGet, {std::string(18, 'k')})), 1,
       "GET key length 18 exceeds the limit of 17 bytes (16 and the client's '/' prefix)"},
      {"value too long", Encode(Dialect::kV1, Req(Op::kSet, {"/k"}, {std::string(33, 'v')})), 11,
       "SET value length 33 exceeds the limit of 32 bytes"},
      {"too many keys", Encode(Dialect::kV1, Req(Op::kWait, {"a", "b", "c", "d", "e"})), 1,
       "WAIT with 5 keys exceeds the limit of 4 keys per request"},
      {"request too large",
       v2 + Encode(Dialect::kV2,
                   Req(Op::kMultiSet, {"/a", "/b"}, {std::string(30, 'x'), std::string(30, 'y')})),
       5 + 1 + 8 + (8 + 2) + (8 + 30) + (8 + 2), "request of more than 48 bytes"},
      {"2.x handshake parsed as a huge v1 SET key",  // what 1.13 saw (spec section 6.1)
       FromHex("00cef785000dd2040000"), 1, "SET key length"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    for (const auto& decoded : {DecodeWhole(c.stream, small), DecodeBytewise(c.stream, small),
                                DecodeRandomSplits(c.stream, 7, small)}) {
      REQUIRE(decoded.malformed);
      CHECK(decoded.error.offset == c.offset);
      CHECK_THAT(decoded.error.reason, Catch::Contains(c.reason));
    }
  }
}

TEST_CASE("forced v2 mode enforces the handshake", "[codec]") {
  const auto no_validate = DecodeWhole(FromHex("07"), {}, DialectMode::kV2);
  REQUIRE(no_validate.malformed);
  CHECK(no_validate.error.offset == 0);
  CHECK_THAT(no_validate.error.reason, Catch::Contains("must open with VALIDATE, not GETNUMKEYS"));
  const auto bad_magic = DecodeWhole(FromHex("0078563412"), {}, DialectMode::kV2);
  REQUIRE(bad_magic.malformed);
  CHECK(bad_magic.error.offset == 1);
  CHECK_THAT(bad_magic.error.reason, Catch::Contains("VALIDATE magic 0x12345678"));
  // Forced v1 parses 00 CE F7 85 3C as a SET (and finds the key too long).
  const auto v1 = DecodeWhole(kHandshake + std::string(4, '\0'), {}, DialectMode::kV1);
  CHECK(v1.dialect == Dialect::kV1);
  CHECK(v1.malformed);
}

TEST_CASE("a malformed decoder stays malformed and consumes nothing", "[codec]") {
  Decoder d;
  REQUIRE(d.Decode(FromHex("09")).status == Decoder::Status::kMalformed);
  const auto again = d.Decode(FromHex("06"));
  CHECK(again.status == Decoder::Status::kMalformed);
  CHECK(again.consumed == 0);
  CHECK(d.malformed().offset == 0);
}

TEST_CASE("a key of exactly the limit, as torch's client sends it ('/' in front), is accepted",
          "[codec]") {
  Limits limits;  // the defaults: 1 MiB keys
  const std::string user_key(kDefaultMaxKeySize, 'k');
  for (Dialect d : {Dialect::kV1, Dialect::kV2}) {
    const std::string v2 = d == Dialect::kV2 ? std::string(kHandshake) : std::string();
    const std::string ok = v2 + Encode(d, Req(Op::kSet, {"/" + user_key}, {"v"}));
    const auto decoded = DecodeWhole(ok, limits);
    REQUIRE_FALSE(decoded.malformed);
    REQUIRE(decoded.requests.size() == (d == Dialect::kV2 ? 2u : 1u));
    CHECK(decoded.requests.back().keys.at(0).size() == kDefaultMaxKeySize + 1);
    const std::string over = v2 + Encode(d, Req(Op::kSet, {"/" + user_key + "k"}, {"v"}));
    const auto rejected = DecodeWhole(over, limits);
    REQUIRE(rejected.malformed);
    CHECK_THAT(rejected.error.reason,
               Catch::Contains("SET key length 1048578 exceeds the limit of 1048577 bytes"));
  }
}

TEST_CASE("bounded random inputs: no crash, and every split agrees", "[codec][random]") {
  // Bounded: 3000 inputs of at most 200 bytes each, fixed seed.  Inputs are biased towards
  // valid-looking prefixes (a real opcode and small lengths) so that parsing gets deep.
  std::mt19937 rng(20240531);
  Limits limits;
  limits.max_key_size = 64;
  limits.max_value_size = 128;
  limits.max_keys_per_request = 8;
  limits.max_request_size = 512;
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> small(0, 12);
  std::uniform_int_distribution<int> coin(0, 3);
  for (int i = 0; i < 3000; ++i) {
    std::string input;
    if (coin(rng) == 0) input += kHandshake;
    const int pieces = 1 + small(rng);
    for (int p = 0; p < pieces && input.size() < 200; ++p) {
      switch (coin(rng)) {
        case 0:
          input.push_back(static_cast<char>(small(rng) + (coin(rng) == 0 ? 5 : 0)));
          break;
        case 1: {
          std::string len;
          AppendU64(len, static_cast<std::uint64_t>(small(rng)));
          input += len;
          break;
        }
        default:
          for (int b = small(rng); b > 0; --b) input.push_back(static_cast<char>(byte(rng)));
      }
    }
    const auto whole = DecodeWhole(input, limits);
    INFO("input " << testing::ToHex(input));
    REQUIRE_FALSE(whole.ate_after_malformed);
    REQUIRE(DecodeBytewise(input, limits) == whole);
    REQUIRE(DecodeRandomSplits(input, static_cast<std::uint32_t>(i), limits) == whole);
    // Re-encoding what was decoded reproduces the consumed prefix of the input.
    if (whole.dialect && !whole.malformed && !whole.mid_request) {
      std::string again;
      for (const auto& r : whole.requests) EncodeRequest(*whole.dialect, r, again);
      REQUIRE(testing::ToHex(again) == testing::ToHex(input));
    }
  }
}

}  // namespace
}  // namespace gculaunch::rendezvous
