// Tests of rendezvous/upstream.h without sockets: the frame reader under every split of the
// same bytes, and the demultiplexer's rules (streams apart, whole requests per frame, frames
// of closed or refused streams dropped, protocol errors end the connection).
#include "rendezvous/upstream.h"

#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "tests/rendezvous/decode_util.h"

namespace gculaunch::rendezvous {
namespace {

using testing::Encode;
using testing::FromHex;
using testing::Req;

std::string Frame(FrameType type, std::uint32_t stream, std::string_view body = "") {
  std::string out;
  AppendFrameHeader(out, type, stream, body.size());
  out += body;
  return out;
}

std::span<const std::uint8_t> Bytes(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// Records what the demultiplexer reports; refuses the streams in `refuse`.
struct Recorder final : UpstreamDemux::Handler {
  bool OnOpen(std::uint32_t stream) override {
    log.push_back("open " + std::to_string(stream));
    return refuse.count(stream) == 0;
  }
  void OnRequest(std::uint32_t stream, Request& request) override {
    std::string line = std::to_string(stream) + " " + std::string(OpName(request.op));
    if (!request.keys.empty()) line += " " + request.keys[0];
    log.push_back(line);
  }
  void OnClose(std::uint32_t stream) override { log.push_back("close " + std::to_string(stream)); }
  void OnMalformed(std::uint32_t stream, const std::string& reason) override {
    log.push_back("malformed " + std::to_string(stream) + ": " + reason);
  }
  std::vector<std::string> log;
  std::set<std::uint32_t> refuse;
};

// Feeds `bytes` in chunks of `chunk` bytes; returns the demux's error ("" if none).
std::string FeedAll(UpstreamDemux& demux, Recorder& rec, std::string_view bytes,
                    std::size_t chunk) {
  std::size_t pos = 0;
  while (pos < bytes.size() && !demux.failed()) {
    std::string_view piece = bytes.substr(pos, chunk);
    while (!piece.empty() && !demux.failed()) {
      const std::size_t used = demux.Feed(Bytes(piece), rec);
      REQUIRE((used > 0 || demux.failed()));
      piece.remove_prefix(used);
    }
    pos += chunk;
  }
  return demux.error();
}

TEST_CASE("upstream: a frame header is 13 little-endian bytes", "[upstream]") {
  CHECK(Frame(FrameType::kData, 0x01020304, "xy") == FromHex("02"
                                                             "04030201"
                                                             "0200000000000000") +
                                                         "xy");
}

TEST_CASE("upstream: two streams in both dialects, any split, in order", "[upstream]") {
  const std::string v1 = Encode(Dialect::kV1, Req(Op::kWait, {"/k"}));
  const std::string v2 = FromHex("00cef7853c") + Encode(Dialect::kV2, Req(Op::kGet, {"/k"}));
  const std::string set = Encode(Dialect::kV2, Req(Op::kSet, {"/k"}, {"v"}));
  const std::string bytes = Frame(FrameType::kOpen, 1) + Frame(FrameType::kOpen, 2) +
                            Frame(FrameType::kData, 1, v1) + Frame(FrameType::kData, 2, v2) +
                            Frame(FrameType::kData, 2, set) + Frame(FrameType::kClose, 1);
  const std::vector<std::string> expected = {"open 1",   "open 2",   "1 WAIT /k", "2 VALIDATE",
                                             "2 GET /k", "2 SET /k", "close 1"};
  for (std::size_t chunk = 1; chunk <= bytes.size(); ++chunk) {
    INFO("chunk " << chunk);
    UpstreamDemux demux{Limits{}};
    Recorder rec;
    CHECK(FeedAll(demux, rec, bytes, chunk).empty());
    CHECK(rec.log == expected);
    CHECK(demux.streams() == 1);
    CHECK(demux.buffered() == 0);
  }
}

TEST_CASE("upstream: frames of a closed or refused stream are dropped", "[upstream]") {
  UpstreamDemux demux{Limits{}};
  Recorder rec;
  rec.refuse = {7};
  const std::string get = Encode(Dialect::kV1, Req(Op::kGet, {"/a"}));
  const std::string bytes = Frame(FrameType::kOpen, 7) + Frame(FrameType::kData, 7, get) +
                            Frame(FrameType::kOpen, 8) + Frame(FrameType::kData, 9, get) +
                            Frame(FrameType::kClose, 9) + Frame(FrameType::kData, 8, get);
  CHECK(FeedAll(demux, rec, bytes, bytes.size()).empty());
  CHECK(rec.log == std::vector<std::string>{"open 7", "open 8", "8 GET /a"});
  demux.Forget(8);  // node 0 closed it
  CHECK(FeedAll(demux, rec, Frame(FrameType::kData, 8, get), 64).empty());
  CHECK(rec.log.size() == 3);
}

TEST_CASE("upstream: a stream's malformed bytes end that stream only", "[upstream]") {
  UpstreamDemux demux{Limits{}};
  Recorder rec;
  const std::string bytes = Frame(FrameType::kOpen, 1) + Frame(FrameType::kOpen, 2) +
                            Frame(FrameType::kData, 1, FromHex("09")) +
                            Frame(FrameType::kData, 2, Encode(Dialect::kV1, Req(Op::kGetNumKeys)));
  CHECK(FeedAll(demux, rec, bytes, 5).empty());
  REQUIRE(rec.log.size() == 4);
  CHECK(rec.log[2].starts_with("malformed 1: unknown query code 0x09"));
  CHECK(rec.log[3] == "2 GETNUMKEYS");
  CHECK(demux.streams() == 1);
}

TEST_CASE("upstream: protocol errors end the whole connection", "[upstream]") {
  const std::string set = Encode(Dialect::kV1, Req(Op::kSet, {"/k"}, {"value"}));
  struct Bad {
    std::string bytes;
    std::string error;
  };
  const std::vector<Bad> cases = {
      {FromHex("04"
               "01000000"
               "0000000000000000"),
       "unknown upstream frame type 4"},
      {Frame(FrameType::kOpen, 1) + Frame(FrameType::kOpen, 1), "open already"},
      {FromHex("01"
               "01000000"
               "0100000000000000") +
           "x",
       "OPEN or CLOSE frame with a body"},
      // Half a SET in one frame, the rest in the next: the whole-request rule.
      {Frame(FrameType::kOpen, 1) + Frame(FrameType::kData, 1, set.substr(0, 6)) +
           Frame(FrameType::kData, 1, set.substr(6)),
       "a DATA frame ended inside a request"},
  };
  for (const Bad& bad : cases) {
    INFO(bad.error);
    UpstreamDemux demux{Limits{}};
    Recorder rec;
    CHECK_THAT(FeedAll(demux, rec, bad.bytes, 3), Catch::Contains(bad.error));
  }
}

TEST_CASE("upstream: the store's limits apply to every stream", "[upstream]") {
  Limits limits;
  limits.max_value_size = 4;
  UpstreamDemux demux{limits};
  Recorder rec;
  const std::string bytes =
      Frame(FrameType::kOpen, 3) +
      Frame(FrameType::kData, 3, Encode(Dialect::kV1, Req(Op::kSet, {"/k"}, {"12345"})));
  CHECK(FeedAll(demux, rec, bytes, 4).empty());
  REQUIRE(rec.log.size() == 2);
  CHECK_THAT(rec.log[1], Catch::StartsWith("malformed 3:") && Catch::Contains("value"));
}

TEST_CASE("upstream: the frame reader hands body bytes out as they arrive", "[upstream]") {
  FrameReader reader;
  const std::string bytes = Frame(FrameType::kData, 5, "hello");
  auto step = reader.Next(Bytes(std::string_view(bytes).substr(0, 10)));
  CHECK(step.status == FrameReader::Status::kNeedMore);
  CHECK(step.consumed == 10);
  step = reader.Next(Bytes(std::string_view(bytes).substr(10)));
  REQUIRE(step.status == FrameReader::Status::kHeader);
  CHECK(reader.stream() == 5);
  CHECK(reader.left() == 5);
  step = reader.Next(Bytes(std::string_view(bytes).substr(13, 2)));
  REQUIRE(step.status == FrameReader::Status::kBody);
  CHECK(reader.body().size() == 2);
  reader.Consume(2);
  CHECK(reader.left() == 3);
}

}  // namespace
}  // namespace gculaunch::rendezvous
