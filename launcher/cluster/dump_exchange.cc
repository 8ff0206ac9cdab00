#include "launcher/cluster/dump_exchange.h"

#include <memory>
#include <utility>

namespace gculaunch {

// ------------------------------------- DumpGatherer -------------------------------------

struct DumpGatherer::Request {
  Request(boost::asio::io_context& io, int request) : timer(io), number(request) {}
  boost::asio::steady_timer timer;
  int number;
  std::vector<NodeStacks> nodes;
  std::vector<bool> answered;
  std::chrono::steady_clock::time_point deadline;
  std::chrono::milliseconds bound{0};
  Done done;
};

DumpGatherer::DumpGatherer(boost::asio::io_context& io, CoordinatorBoard& board)
    : io_(io), board_(board) {}

void DumpGatherer::Gather(const std::vector<int>& nodes, std::chrono::milliseconds bound,
                          Done done) {
  // A node that answered the last request after its bound left its answer behind.
  if (last_request_ > 0) Forget(last_request_, last_nodes_);
  last_request_ = 0;
  auto request = std::make_shared<Request>(io_, board_.RequestDump());
  for (const int node : nodes) {
    NodeStacks part;
    part.node_rank = node;
    part.title = "stacks of node " + std::to_string(node);
    request->nodes.push_back(std::move(part));
  }
  request->answered.assign(nodes.size(), false);
  request->bound = bound;
  request->deadline = std::chrono::steady_clock::now() + bound;
  request->done = std::move(done);
  Check(request);
}

void DumpGatherer::Check(const std::shared_ptr<Request>& request) {
  bool all = true;
  for (size_t i = 0; i < request->nodes.size(); ++i) {
    if (request->answered[i]) continue;
    NodeStacks& part = request->nodes[i];
    const auto answer = board_.DumpAnswer(request->number, part.node_rank);
    if (!answer) {
      all = false;
      continue;
    }
    request->answered[i] = true;
    auto decoded = DecodeNodeStacks(*answer);
    if (decoded.ok()) {
      decoded->node_rank = part.node_rank;
      part = std::move(*decoded);
    } else {
      part.missing = decoded.error().what;
    }
  }
  const bool late = std::chrono::steady_clock::now() >= request->deadline;
  if (all || late) {
    for (size_t i = 0; i < request->nodes.size(); ++i) {
      if (!request->answered[i]) {
        request->nodes[i].missing =
            "no answer within " + std::to_string(request->bound.count() / 1000) +
            " s (the node is gone, not running ranks, or runs a gculaunch without stack "
            "dumps)";
      }
    }
    std::vector<int> asked;
    for (const NodeStacks& part : request->nodes) asked.push_back(part.node_rank);
    Forget(request->number, asked);
    last_request_ = request->number;
    last_nodes_ = asked;
    request->done(std::move(request->nodes));
    return;
  }
  request->timer.expires_after(std::chrono::milliseconds(100));
  request->timer.async_wait(lifetime_.Wrap([this, request](const boost::system::error_code& ec) {
    if (!ec) Check(request);
  }));
}

void DumpGatherer::Forget(int request, const std::vector<int>& nodes) {
  for (const int node : nodes) board_.ForgetDump(request, node);
}

// ------------------------------------- DumpResponder ------------------------------------

DumpResponder::DumpResponder(boost::asio::io_context& io, AgentBoard& board, LocalDump dump,
                             std::chrono::milliseconds poll)
    : board_(board), dump_(std::move(dump)), poll_(poll), timer_(io) {}

void DumpResponder::Start() { Poll(); }

void DumpResponder::Arm() {
  timer_.expires_after(poll_);
  timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
    if (!ec) Poll();
  }));
}

void DumpResponder::Poll() {
  board_.ReadDumpRequest(lifetime_.Wrap([this](const Result<int>& n) {
    if (n.ok() && !busy_ && *n > last_) {
      last_ = *n;
      Answer(*n);
    }
    Arm();
  }));
}

void DumpResponder::Answer(int request) {
  busy_ = true;
  dump_(lifetime_.Wrap([this, request](const NodeStacks& part) {
    board_.PublishDump(request, EncodeNodeStacks(part), lifetime_.Wrap([this](const Status&) {
      busy_ = false;
      ++answered_;
    }));
  }));
}

}  // namespace gculaunch
