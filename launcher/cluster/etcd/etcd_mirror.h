// EtcdMirror: a local copy of every key under one prefix of a job on etcd (docs/etcd.md, "Job
// rendezvous on etcd"): GetPrefix, then a watch from the listing's revision + 1 (a compaction
// lists again).  "Key appears" waits and every change are served from it, so nothing polls
// etcd.  Its requests go through the process's EtcdMember (etcd_member.h).
//
// Lifetime: the member outlives its mirrors; Stop() (or the destructor) ends every callback.
// Thread safety: the io_context's thread only.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/error.h"
#include "etcd/client.h"
#include "launcher/cluster/etcd/etcd_member.h"

namespace gculaunch {

class EtcdMirror {
 public:
  /// Keys are reported relative to `prefix` (the key `prefix` itself is "").
  using Changed = std::function<void(const etcd::Event& event, const std::string& key)>;

  EtcdMirror(EtcdMember& member, std::string prefix);
  ~EtcdMirror();
  EtcdMirror(const EtcdMirror&) = delete;
  EtcdMirror& operator=(const EtcdMirror&) = delete;

  /// Lists the prefix and starts watching; `ready` once the first listing is in.
  void Start(std::function<void(Status)> ready);
  /// No more callbacks after this.
  void Stop();

  std::optional<std::string> Get(const std::string& key) const;
  const etcd::KeyValue* Find(const std::string& key) const;
  /// `found(value)` once `key` exists (posted when it already does).
  void WaitKey(const std::string& key, std::function<void(std::string)> found);
  /// After every change the watch applied (puts and deletes).
  void OnChange(Changed changed);
  /// The watch failed for good (etcd unreachable longer than the watch's reconnect time).
  void OnBroken(std::function<void(std::string)> broken);

  struct Shared;  // the copy, shared with the watch's coroutine (etcd_mirror.cc)

 private:
  EtcdMember& member_;
  std::string prefix_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace gculaunch
