#include "rendezvous/upstream.h"

#include <algorithm>

namespace gculaunch::rendezvous {

void AppendFrameHeader(std::string& out, FrameType type, std::uint32_t stream,
                       std::uint64_t length) {
  AppendU8(out, static_cast<std::uint8_t>(type));
  AppendU32(out, stream);
  AppendU64(out, length);
}

void AppendFrameHeader(Reply& out, FrameType type, std::uint32_t stream, std::uint64_t length) {
  std::string header;
  AppendFrameHeader(header, type, stream, length);
  out.Append(header);
}

FrameReader::Step FrameReader::Next(std::span<const std::uint8_t> input) {
  if (!error_.empty()) return {Status::kBad, 0};
  if (left_ > 0) {
    body_ = input.first(static_cast<std::size_t>(std::min<std::uint64_t>(left_, input.size())));
    return {Status::kBody, 0};
  }
  const std::size_t take = std::min(kFrameHeaderSize - have_, input.size());
  std::copy_n(input.begin(), take, header_ + have_);
  have_ += take;
  if (have_ < kFrameHeaderSize) return {Status::kNeedMore, take};
  have_ = 0;
  const std::uint8_t type = header_[0];
  if (type < static_cast<std::uint8_t>(FrameType::kOpen) ||
      type > static_cast<std::uint8_t>(FrameType::kClose)) {
    error_ = "unknown upstream frame type " + std::to_string(type);
    return {Status::kBad, take};
  }
  type_ = static_cast<FrameType>(type);
  stream_ = LoadU32(header_ + 1);
  left_ = LoadU64(header_ + 5);
  if (type_ != FrameType::kData && left_ != 0) {
    error_ = "an upstream OPEN or CLOSE frame with a body";
    return {Status::kBad, take};
  }
  return {Status::kHeader, take};
}

void FrameReader::Consume(std::size_t n) {
  left_ -= n;
  body_ = {};
}

UpstreamDemux::UpstreamDemux(const Limits& limits) : limits_(limits) {}

std::size_t UpstreamDemux::buffered() const {
  return current_ != nullptr ? current_->buffered() : 0;
}

void UpstreamDemux::Fail(std::string reason) {
  if (error_.empty()) error_ = std::move(reason);
}

void UpstreamDemux::Forget(std::uint32_t stream) {
  auto it = decoders_.find(stream);
  if (it == decoders_.end()) return;
  if (current_ == it->second.get()) current_ = nullptr;
  retired_ = std::move(it->second);  // its request may be in the caller's hands right now
  decoders_.erase(it);
}

std::size_t UpstreamDemux::Feed(std::span<const std::uint8_t> input, Handler& handler) {
  retired_.reset();
  std::size_t used = 0;
  bool handed = false;
  while (!failed() && !handed && used < input.size()) {
    const auto step = reader_.Next(input.subspan(used));
    used += step.consumed;
    if (step.status == FrameReader::Status::kBad) {
      Fail(reader_.error());
    } else if (step.status == FrameReader::Status::kHeader) {
      if (!OnHeader(handler)) break;
    } else if (step.status == FrameReader::Status::kBody) {
      const std::size_t n = OnBody(reader_.body(), handler, handed);
      reader_.Consume(n);
      used += n;
    }
    if (step.status != FrameReader::Status::kNeedMore && !failed() && reader_.left() == 0 &&
        reader_.type() == FrameType::kData) {
      // The frame is complete: the whole-request rule says no request may be left open.
      if (current_ != nullptr && current_->mid_request()) {
        Fail("stream " + std::to_string(reader_.stream()) +
             ": a DATA frame ended inside a request");
      }
      current_ = nullptr;
    }
  }
  return used;
}

bool UpstreamDemux::OnHeader(Handler& handler) {
  const std::uint32_t stream = reader_.stream();
  auto it = decoders_.find(stream);
  switch (reader_.type()) {
    case FrameType::kOpen:
      if (it != decoders_.end()) {
        Fail("OPEN of stream " + std::to_string(stream) + ", which is open already");
        return false;
      }
      if (handler.OnOpen(stream)) {
        decoders_.emplace(stream, std::make_unique<Decoder>(limits_));
      }
      return true;
    case FrameType::kData:
      current_ = it != decoders_.end() ? it->second.get() : nullptr;
      return true;
    case FrameType::kClose:
      if (it != decoders_.end()) {
        Forget(stream);
        handler.OnClose(stream);
      }
      return true;
  }
  return true;
}

std::size_t UpstreamDemux::OnBody(std::span<const std::uint8_t> body, Handler& handler,
                                  bool& handed) {
  if (current_ == nullptr) return body.size();  // a stream node 0 closed or refused
  const std::uint32_t stream = reader_.stream();
  const auto step = current_->Decode(body);
  if (step.status == Decoder::Status::kRequest) {
    Decoder* decoder = current_;
    handler.OnRequest(stream, decoder->request());
    if (current_ == decoder) decoder->TrimRequest();
    handed = true;
  } else if (step.status == Decoder::Status::kMalformed) {
    const std::string reason = current_->malformed().reason;
    Forget(stream);
    handler.OnMalformed(stream, reason);
    return body.size();  // the rest of the frame belongs to the closed stream
  }
  return step.consumed;
}

}  // namespace gculaunch::rendezvous
