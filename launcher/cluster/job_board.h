// JobBoard: the job protocol (job_protocol.h) as operations, whatever store carries them.
//
//   AgentBoard        what a node agent does: connect, join, wait for its admission, plans
//                     and markers, publish markers, report done / reaped, heartbeat, say bye;
//                     answer stack-dump requests and report progress (--hang-timeout)
//   CoordinatorBoard  what node 0's coordinator does: watch join requests, admit, publish
//                     plans and markers, watch the nodes' reports, read heartbeats, hear of
//                     nodes that hung up, switch the ranks' key space
//
// The NodeAgent and the Coordinator use nothing else, so another rendezvous backend needs
// only these two classes: store_board.h keeps the keys in node 0's TCP store, a backend's
// folder has its own (docs/architecture.md, "Where to add").
//
// Every callback runs on the io_context, never inline.
// Thread safety: the io_context's thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "base/error.h"

namespace gculaunch {

class AgentBoard {
 public:
  using Done = std::function<void(Status)>;
  using Text = std::function<void(Result<std::string>)>;
  using Seq = std::function<void(Result<int>)>;

  virtual ~AgentBoard() = default;
  /// Reaches the job's store; `rejoin`: it went away before, wait up to `deadline` for it.
  virtual void Connect(bool rejoin, std::chrono::milliseconds deadline, Done done) = 0;
  /// The address this node reaches the store from ("" in-process).
  virtual std::string LocalAddress() const = 0;
  /// Elastic jobs: draws a fresh node id (1, 2, ...) and uses it as this node's key from now
  /// on; `done` gets it.
  virtual void TakeId(Seq done) = 0;
  /// Sends a join request (its registration); `done` gets the request's number.
  virtual void Join(const std::string& registration, Seq done) = 0;
  /// Heartbeats for join `seq` until Quiet(); `on_lost(what)` once if the store goes away.
  virtual void Beat(int seq, std::function<void(std::string)> on_lost) = 0;
  virtual void Quiet() = 0;
  virtual void WaitAdmission(int seq, Text done) = 0;
  /// The plan of `epoch`: this node's own (`own`, job/nodeplan/<e>/<k>) or the whole one.
  virtual void WaitPlan(int epoch, bool own, Text done) = 0;
  virtual void WaitMarker(int epoch, Text done) = 0;
  /// First writer wins; `done` gets the epoch's marker afterwards.
  virtual void PublishMarker(int epoch, const std::string& marker, Text done) = 0;
  virtual void ReportDone(int epoch, Done done) = 0;
  /// `report`: the node's AttemptReport, encoded (job_protocol.h).
  virtual void ReportReaped(int epoch, const std::string& report, Done done) = 0;
  virtual void SayBye(int seq, int exit_code, Done done) = 0;
  /// The coordinator's latest "still missing" text ("" when none).
  virtual void ReadMissing(Text done) = 0;
  /// Node 0's registration, as the coordinator published it ("" when there is none yet).
  virtual void ReadJobInfo(Text done) = 0;
  /// Stack dumps (dump_exchange.h): the number of node 0's latest request (0: none yet), and
  /// this node's answer to request `request`.
  virtual void ReadDumpRequest(Seq done) = 0;
  virtual void PublishDump(int request, const std::string& stacks, Done done) = 0;
  /// --hang-timeout (job_hang.h): this node's latest progress report, replacing the last.
  virtual void PublishProgress(const std::string& report, Done done) = 0;
  virtual void Close() = 0;
};

class CoordinatorBoard {
 public:
  using Text = std::function<void(Result<std::string>)>;
  using Fired = std::function<void()>;

  virtual ~CoordinatorBoard() = default;
  /// `text` once join request `seq` of `node` exists.
  virtual void WatchJoin(int node, int seq, Text text) = 0;
  /// How many join requests `node` has numbered (to skip one whose sender died at once).
  virtual int JoinsNumbered(int node) const = 0;
  /// Elastic jobs: how many node ids TakeId handed out (the same, for ids).
  virtual int IdsTaken() const = 0;
  virtual bool JoinExists(int node, int seq) const = 0;
  virtual void Admit(int node, int seq, const std::string& plan) = 0;
  virtual void PublishPlan(int epoch, const std::string& plan) = 0;
  /// Node `node`'s own plan of `epoch` (job_protocol.h, PlanFor).
  virtual void PublishNodePlan(int epoch, int node, const std::string& plan) = 0;
  /// Deletes node `node`'s own plan of `epoch` (a later epoch's plan is out).
  virtual void ForgetNodePlan(int epoch, int node) = 0;
  virtual void PublishMarker(int epoch, const std::string& marker) = 0;
  virtual void WatchMarker(int epoch, Text text) = 0;
  virtual void WatchDone(int epoch, int node, Fired fired) = 0;
  /// `report` gets the node's reaped report (its text) once it exists.
  virtual void WatchReaped(int epoch, int node, Text report) = 0;
  virtual void WatchBye(int node, int seq, std::function<void(int)> exit_code) = 0;
  virtual bool SaidBye(int node, int seq) const = 0;
  /// A value that changes whenever join `seq` of `node` was heard from: its heartbeats, and
  /// on the TCP store anything else its control connection sends ("" before the first beat).
  virtual std::string Heartbeat(int node, int seq) const = 0;
  virtual void SetMissing(const std::string& text) = 0;
  /// Publishes node 0's registration for the nodes that are about to join.
  virtual void PublishJobInfo(const std::string& registration) = 0;
  /// The ranks' key space moves to `epoch` (every rank of the one before is reaped).
  virtual void BeginAttempt(int epoch) = 0;
  /// `hung_up(node, seq, why)` when the heartbeat of join `seq` of `node` ends without a bye
  /// (`why`: how the board saw it end, for the "was lost" line).
  using HungUp = std::function<void(int, int, const std::string&)>;
  virtual void OnHangUp(HungUp hung_up) = 0;
  /// Stack dumps (dump_exchange.h): asks every node for its stacks and returns the request's
  /// number; node `node`'s answer to it (nullopt until it answered).
  virtual int RequestDump() = 0;
  virtual std::optional<std::string> DumpAnswer(int request, int node) const = 0;
  /// Deletes node `node`'s answer to request `request` (if any): node 0 gathered it.
  virtual void ForgetDump(int request, int node) = 0;
  /// --hang-timeout (job_hang.h): node `node`'s latest progress report (nullopt: none yet).
  virtual std::optional<std::string> ProgressReport(int node) const = 0;
};

}  // namespace gculaunch
