// The job boards (job_board.h) on the built-in store: the keys of docs/multinode.md in node 0's
// TCP store.
//
//   StoreAgentBoard        every node's agent, over an AgentLink (in-process on node 0, two TCP
//                          connections elsewhere)
//   StoreCoordinatorBoard  node 0's coordinator, over the rendezvous::Server in its process;
//                          the store's connection hooks tell it of heartbeats and hang-ups
//
// Every callback runs on the io_context, never inline.
// Thread safety: the io_context's thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "base/lifetime.h"
#include "launcher/cluster/agent_link.h"
#include "launcher/cluster/job_board.h"
#include "launcher/run/supervisor.h"
#include "rendezvous/server.h"

namespace gculaunch {

class RemoteAgentLink;

class StoreAgentBoard : public AgentBoard {
 public:
  /// `remote` is `link` on the other nodes, null on node 0 (in-process).  Both outlive this.
  StoreAgentBoard(AgentLink& link, RemoteAgentLink* remote, int node);
  void Connect(bool rejoin, std::chrono::milliseconds deadline, Done done) override;
  std::string LocalAddress() const override;
  void TakeId(Seq done) override;
  void Join(const std::string& registration, Seq done) override;
  void Beat(int seq, std::function<void(std::string)> on_lost) override;
  void Quiet() override;
  void WaitAdmission(int seq, Text done) override;
  void WaitPlan(int epoch, bool own, Text done) override;
  void WaitMarker(int epoch, Text done) override;
  void PublishMarker(int epoch, const std::string& marker, Text done) override;
  void ReportDone(int epoch, Done done) override;
  void ReportReaped(int epoch, const std::string& report, Done done) override;
  void SayBye(int seq, int exit_code, Done done) override;
  void ReadMissing(Text done) override;
  void ReadJobInfo(Text done) override;
  void ReadDumpRequest(Seq done) override;
  void PublishDump(int request, const std::string& stacks, Done done) override;
  void PublishProgress(const std::string& report, Done done) override;
  void Close() override;

 private:
  AgentLink& link_;
  RemoteAgentLink* remote_;
  int node_;
};

class StoreCoordinatorBoard : public CoordinatorBoard {
 public:
  /// `server` and `attempts` outlive this.  `nnodes`: heartbeats of node keys 1..nnodes-1
  /// count (elastic jobs: any key above 0, pass kAnyNode).  A node's control connection (the
  /// one that heartbeats) gets `keepalive`, so that its host vanishing ends it in seconds.
  StoreCoordinatorBoard(rendezvous::Server& server, AttemptObserver& attempts, int nnodes,
                        rendezvous::TcpKeepAlive keepalive = {});
  static constexpr int kAnyNode = 1 << 30;
  void WatchJoin(int node, int seq, Text text) override;
  int JoinsNumbered(int node) const override;
  int IdsTaken() const override;
  bool JoinExists(int node, int seq) const override;
  void Admit(int node, int seq, const std::string& plan) override;
  void PublishPlan(int epoch, const std::string& plan) override;
  void PublishNodePlan(int epoch, int node, const std::string& plan) override;
  void ForgetNodePlan(int epoch, int node) override;
  void PublishMarker(int epoch, const std::string& marker) override;
  void WatchMarker(int epoch, Text text) override;
  void WatchDone(int epoch, int node, Fired fired) override;
  void WatchReaped(int epoch, int node, Text report) override;
  void WatchBye(int node, int seq, std::function<void(int)> exit_code) override;
  bool SaidBye(int node, int seq) const override;
  std::string Heartbeat(int node, int seq) const override;
  void SetMissing(const std::string& text) override;
  void PublishJobInfo(const std::string& registration) override;
  void BeginAttempt(int epoch) override;
  void OnHangUp(HungUp hung_up) override;
  int RequestDump() override;
  std::optional<std::string> DumpAnswer(int request, int node) const override;
  void ForgetDump(int request, int node) override;
  std::optional<std::string> ProgressReport(int node) const override;

  /// From the store's observers (ConnectionHooks in coordinator.h): a heartbeat names its
  /// control connection, whose every request is then heard; that connection ending (`why`:
  /// its I/O error, "" when the peer closed it) is a hang-up.
  void OnRequest(rendezvous::ConnId id, const rendezvous::Request& request);
  void OnConnectionEnd(rendezvous::ConnId id, const std::string& why);

 private:
  void WaitKey(const std::string& key, std::function<void(bool)> done);

  rendezvous::Server& server_;
  AttemptObserver& attempts_;
  int nnodes_;
  rendezvous::TcpKeepAlive keepalive_;
  /// (node, join) as one key of heard_.
  static std::uint64_t JoinId(int node, int seq) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(node)) << 32) |
           static_cast<std::uint32_t>(seq);
  }
  struct Beater {
    int node = 0;
    int seq = 0;
    std::uint64_t* heard = nullptr;  ///< its entry in heard_ (a node-based map: stable)
  };
  // Hashed, not ordered: OnRequest looks up every request of the job (a rank's too), and at
  // 16k nodes a tree's dozen cache misses per lookup were 5% of node 0's CPU (bench.scale).
  std::unordered_map<rendezvous::ConnId, Beater> beaters_;  ///< control connection -> its join
  std::unordered_map<std::uint64_t, std::uint64_t> heard_;  ///< JoinId -> requests; never erased
  HungUp hung_up_;
  LifetimeGuard lifetime_;  ///< last member: expires first
};

/// The store's hooks for the board.  The store is built before the board (which needs the
/// store), so the hooks forward to whatever `target` is set to later.
struct ConnectionHooks {
  StoreCoordinatorBoard* target = nullptr;
  /// Server options whose observers forward to `hooks->target`; without hooks (null), the
  /// default options.
  static rendezvous::ServerOptions Options(const std::shared_ptr<ConnectionHooks>& hooks);
};

}  // namespace gculaunch
