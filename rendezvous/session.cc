#include "rendezvous/session.h"

#include <spdlog/spdlog.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/write.hpp>

namespace gculaunch::rendezvous {
namespace {

constexpr std::size_t kInitialReadBuffer = 2048;
constexpr std::size_t kMaxReadBuffer = 256u << 10;
// Pieces handed to one non-blocking send (Asio passes at most 64 buffers to sendmsg).
constexpr std::size_t kMaxGather = 64;

}  // namespace

Session::Session(boost::asio::ip::tcp::socket socket, ConnId id, std::string peer,
                 const Limits& limits, SessionOwner& owner, spdlog::logger& log,
                 SessionBounds bounds)
    : socket_(std::move(socket)),
      id_(id),
      peer_(std::move(peer)),
      decoder_(limits),
      owner_(owner),
      log_(log),
      read_buf_(kInitialReadBuffer),
      bounds_(std::move(bounds)),
      out_(nullptr) {
  if (!bounds_.budget) bounds_.budget = std::make_shared<BufferBudget>();
  out_ = Reply(&bounds_.budget->values);
}

Session::~Session() {
  ReleaseInflight();
  bounds_.budget->charged -= charged_;
}

void Session::Start() {
  boost::system::error_code ignored;
  socket_.non_blocking(true, ignored);  // write_some in Flush must never block
  DoRead();
}

int Session::native_handle() { return socket_.is_open() ? socket_.native_handle() : -1; }

void Session::DoRead() {
  if (closed_ || closing_ || reading_ || !pending_.empty()) return;
  reading_ = true;
  socket_.async_read_some(
      boost::asio::buffer(read_buf_),
      [self = shared_from_this()](const boost::system::error_code& ec, std::size_t size) {
        self->OnRead(ec, size);
      });
}

void Session::OnRead(const boost::system::error_code& ec, std::size_t size) {
  reading_ = false;
  if (closed_) return;
  if (ec) {
    if (ec != boost::asio::error::eof && ec != boost::asio::error::operation_aborted) {
      log_.debug("connection {} from {}: read failed: {}", id_, peer_, ec.message());
      error_ = ec.message();
    }
    End();
    return;
  }
  pending_ = std::span<const std::uint8_t>(read_buf_.data(), size);
  filled_buffer_ = size == read_buf_.size();
  Process();
}

void Session::Upgrade(bool paced) {
  raw_ = true;
  paced_ = paced;
}

bool Session::ProcessRaw() {
  const std::size_t used = owner_.OnRaw(*this, pending_);
  if (closed_) return false;  // Close() dropped the pending bytes
  pending_ = pending_.subspan(used);
  return used > 0;
}

void Session::Process() {
  while (true) {
    while (!closed_ && !closing_ && !pending_.empty() &&
           (queued() <= kOutputHighWater || (raw_ && !paced_))) {
      if (raw_) {
        if (ProcessRaw()) continue;
        // The owner must take bytes or close the session; a stuck stream would spin here.
        if (!closing_ && !closed_) CloseAfterFlush("the upstream protocol stalled");
        break;
      }
      const auto step = decoder_.Decode(pending_);
      pending_ = pending_.subspan(step.consumed);
      if (step.status == Decoder::Status::kRequest) {
        owner_.OnRequest(*this, decoder_.request());
        decoder_.TrimRequest();  // a handled request holds nothing the budget does not count
        continue;
      }
      if (step.status == Decoder::Status::kMalformed) {
        const Malformed& bad = decoder_.malformed();
        CloseAfterFlush("malformed input at byte " + std::to_string(bad.offset) + ": " +
                        bad.reason);
      }
      break;
    }
    if (closed_) return;
    Flush();
    if (closed_ || closing_ || pending_.empty()) break;
    // Decoding paused above the high-water mark.  If the output is still being written,
    // OnWrite resumes; if Flush sent it all at once, go on right away.
    if (writing_) return;
  }
  if (closed_) return;
  if (filled_buffer_ && read_buf_.size() < kMaxReadBuffer) read_buf_.resize(read_buf_.size() * 2);
  filled_buffer_ = false;
  DoRead();
}

bool Session::Account() {
  BufferBudget& budget = *bounds_.budget;
  const std::size_t now = RequestBytes() + out_.own_bytes() + inflight_own_;
  budget.charged = budget.charged - charged_ + now;
  charged_ = now;
  if (queued() > bounds_.max_queued) {
    // Deliveries cannot be back-pressured (that would stall whoever caused them), and one
    // reply this large is past a limit too: either way the protocol's only answer is a close.
    owner_.WarnClose(*this, std::to_string(queued()) +
                                " bytes wait to be sent to it, more than the limit of " +
                                std::to_string(bounds_.max_queued) +
                                " (a client that does not read its replies or watch events; "
                                "raise --max-queued)");
    End();
    return false;
  }
  if (budget.over()) owner_.OnOverBudget();
  return !closed_;
}

void Session::Flush() {
  if (closed_) return;
  if (!Account() || writing_) return;
  if (!out_.empty()) {
    // Most replies fit in the socket buffer: send them right away, gathering the pieces (a
    // shared value is sent from where the store keeps it).  An async_write would send them
    // just the same (Asio tries the send at once), but then also queue and run a
    // completion handler, which costs about as much as the request itself.
    iov_.clear();
    for (std::size_t i = 0; i < out_.pieces() && i < kMaxGather; ++i) {
      std::string_view bytes = out_.piece(i).view();
      if (i == 0) bytes.remove_prefix(out_.front_offset());
      iov_.emplace_back(bytes.data(), bytes.size());
    }
    boost::system::error_code ec;
    const std::size_t sent = socket_.write_some(iov_, ec);
    if (ec && ec != boost::asio::error::would_block && ec != boost::asio::error::try_again) {
      log_.debug("connection {} from {}: write failed: {}", id_, peer_, ec.message());
      error_ = ec.message();
      End();
      return;
    }
    out_.Consume(sent);
  }
  if (out_.empty()) {
    if (closing_) End();
    return;
  }
  // The socket buffer is full: hand the rest to an asynchronous write.  Its pieces move to
  // inflight_, which nothing touches until the write completes, so the buffers stay valid
  // while new output queues up behind them.
  inflight_size_ = out_.size();
  inflight_own_ = out_.own_bytes();
  std::size_t offset = out_.TakeAll(inflight_);
  inflight_pinned_ = true;
  iov_.clear();
  for (const Reply::Piece& piece : inflight_) {
    std::string_view bytes = piece.view();
    bytes.remove_prefix(offset);
    offset = 0;
    iov_.emplace_back(bytes.data(), bytes.size());
  }
  writing_ = true;
  boost::asio::async_write(
      socket_, iov_, [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
        self->OnWrite(ec);
      });
}

void Session::ReleaseInflight() {
  if (inflight_pinned_) {
    for (const Reply::Piece& piece : inflight_) {
      if (piece.value) bounds_.budget->values.Unpin(piece.value.get());
    }
  }
  inflight_pinned_ = false;
  inflight_.clear();
  inflight_size_ = 0;
  inflight_own_ = 0;
}

void Session::OnWrite(const boost::system::error_code& ec) {
  writing_ = false;
  ReleaseInflight();
  if (closed_) return;
  if (ec) {
    if (ec != boost::asio::error::operation_aborted) {
      log_.debug("connection {} from {}: write failed: {}", id_, peer_, ec.message());
      error_ = ec.message();
    }
    End();
    return;
  }
  Flush();
  if (closed_) return;
  if (!pending_.empty()) {
    Process();  // decoding paused for flow control
  } else {
    DoRead();
  }
}

void Session::CloseAfterFlush(const std::string& reason) {
  if (closed_ || closing_) return;
  closing_ = true;
  owner_.WarnClose(*this, reason);
  // A pending read (when called from outside OnRead) is cancelled by the close in End().
  if (!writing_) Flush();
}

void Session::Close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  socket_.close(ignored);
  // What the session held no longer counts at once (the owner may be shedding connections
  // until the budget fits).  A write in flight keeps its pieces until its aborted handler
  // runs; the closed socket no longer reads them.
  out_.Clear();
  if (inflight_pinned_) {
    for (const Reply::Piece& piece : inflight_) {
      if (piece.value) bounds_.budget->values.Unpin(piece.value.get());
    }
    inflight_pinned_ = false;
  }
  pending_ = {};
  bounds_.budget->charged -= charged_;
  charged_ = 0;
}

void Session::End() {
  if (closed_) return;
  Close();
  owner_.OnSessionEnd(*this);
}

}  // namespace gculaunch::rendezvous
