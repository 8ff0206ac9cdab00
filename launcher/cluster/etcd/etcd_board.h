// The job boards (job_board.h) on etcd: the keys of docs/multinode.md under the job's prefix,
// one key space per leadership term (docs/etcd.md, "Job rendezvous on etcd"):
//
//   P = "<etcd prefix>/<rdzv id>/"
//   P/term           the number of the latest term (no lease)
//   P/leader         the term leader's key, on its lease: LeaderInfo as JSON
//   P/t/<term>/...   job_protocol.h's keys (job/join/..., job/plan/<e>, job/hb/<k>/<s>, ...)
//
//   EtcdAgentBoard        every node's agent, the leader's own included.  Connect() follows
//                         the current leader's term; TakeId() is 0 on the leader (it is node 0
//                         of its term), else a drawn id; heartbeats are keys on this process's
//                         lease; Beat's on_lost fires once when the leader key goes away or
//                         names another term, or when this process's lease ended.
//   EtcdCoordinatorBoard  the leader's coordinator.  Every write is a transaction guarded by
//                         the leader key's create_revision (`guard`), serialised in order: a
//                         deposed leader writes nothing, and OnDeposed() tells it.  Heartbeat
//                         keys deleted (their lease ended) are hang-ups.
//
// Every callback runs on the io_context, never inline.
// Thread safety: the io_context's thread only.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "launcher/cluster/etcd/etcd_mirror.h"
#include "launcher/cluster/job_board.h"
#include "launcher/run/supervisor.h"

namespace gculaunch {

/// The value of P/leader.
struct LeaderInfo {
  int term = 0;
  std::string host;
  int pid = 0;
  std::string incarnation;
};
std::string EncodeLeader(const LeaderInfo& leader);
std::optional<LeaderInfo> DecodeLeader(const std::string& text);
/// P/t/<term>/
std::string TermPrefix(const std::string& prefix, int term);
inline constexpr const char* kEtcdTermKey = "term";
inline constexpr const char* kEtcdLeaderKey = "leader";

class EtcdAgentBoard : public AgentBoard {
 public:
  /// `member` outlives this; `local_address`: the address the other nodes (and the ranks)
  /// reach this node on.
  EtcdAgentBoard(EtcdMember& member, std::string local_address);
  ~EtcdAgentBoard() override;

  void Connect(bool rejoin, std::chrono::milliseconds deadline, Done done) override;
  std::string LocalAddress() const override { return local_address_; }
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

  /// The term this board follows (0 before Connect).
  int term() const { return term_; }

 private:
  /// One attempt of Connect: list and watch the leader key, wait for a leader, follow its
  /// term; an etcd error is retried after `backoff` (doubling to 1 s) until the deadline.
  void TryConnect(const std::shared_ptr<Done>& once, const std::shared_ptr<std::string>& last_error,
                  std::chrono::milliseconds backoff);
  void Follow(Done done);
  void LeaderChanged();
  void Lose(std::string what);
  void Write(const std::string& key, const std::string& value, Done done);
  void Read(const std::string& key, Text done);
  std::string Key(const std::string& key) const {
    return TermPrefix(member_.prefix(), term_) + key;
  }

  EtcdMember& member_;
  std::string local_address_;
  EtcdMirror leader_;  ///< P/leader
  bool leader_started_ = false;
  std::unique_ptr<EtcdMirror> keys_;  ///< P/t/<term>/
  int term_ = 0;
  int node_ = 0;
  LeaderInfo followed_;  ///< the leader Connect found
  std::function<void(std::string)> on_lost_;
  int lease_listener_ = 0;
  std::unique_ptr<boost::asio::steady_timer> connect_timer_;
  std::unique_ptr<boost::asio::steady_timer> retry_timer_;  ///< Connect's back-off
  LifetimeGuard lifetime_;                                  ///< last member: expires first
};

class EtcdCoordinatorBoard : public CoordinatorBoard {
 public:
  /// The board of term `term`, whose leader key was created at revision `guard`.  `member`
  /// and `attempts` (the ranks' store) outlive this.
  EtcdCoordinatorBoard(EtcdMember& member, int term, std::int64_t guard, AttemptObserver& attempts);
  ~EtcdCoordinatorBoard() override;

  /// Lists the term's keys and watches them; `ready` before the Coordinator may start.
  void Start(std::function<void(Status)> ready);
  /// `deposed(what)` once, when a guarded write is refused (another leader's term, or no
  /// leader key) or etcd cannot be reached.  Writes are dropped from then on.
  void OnDeposed(std::function<void(std::string)> deposed);
  bool deposed() const { return deposed_; }

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

 private:
  /// Queues one guarded write: `op` on the term's key `key`; `only_if_missing`: and only if
  /// the key does not exist yet (first writer wins).
  void Write(etcd::RequestOp op, bool only_if_missing);
  void Pump();
  void Deposed(std::string what);
  void Changed(const etcd::Event& event, const std::string& key);
  std::string Key(const std::string& key) const {
    return TermPrefix(member_.prefix(), term_) + key;
  }
  int Number(const std::string& key) const;

  EtcdMember& member_;
  int term_;
  std::int64_t guard_;
  AttemptObserver& attempts_;
  EtcdMirror keys_;
  std::deque<etcd::TxnRequest> writes_;
  bool writing_ = false;
  static constexpr int kWriteRetries = 3;  ///< etcd unreachable: the same write again
  int retries_ = 0;
  boost::asio::steady_timer retry_timer_;
  bool deposed_ = false;
  std::function<void(std::string)> on_deposed_;
  HungUp hung_up_;
  int dump_requests_ = 0;
  /// Heartbeat(): a value that changes on every call while the key exists, frozen after.
  mutable std::map<std::pair<int, int>, std::string> beats_;
  mutable long beat_calls_ = 0;
  LifetimeGuard lifetime_;  ///< last member: expires first
};

}  // namespace gculaunch
