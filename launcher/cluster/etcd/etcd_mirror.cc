#include "launcher/cluster/etcd/etcd_mirror.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <map>
#include <vector>

// GCC 12 reports a false -Wmismatched-new-delete where Asio's awaitable frames are inlined.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace gculaunch {

namespace asio = boost::asio;

struct EtcdMirror::Shared {
  std::map<std::string, etcd::KeyValue> keys;
  std::multimap<std::string, std::function<void(std::string)>> waiters;
  Changed changed;
  std::function<void(std::string)> broken;
  std::unique_ptr<etcd::Watch> watch;
  bool stopped = false;

  void Fire(const std::string& key) {
    auto range = waiters.equal_range(key);
    std::vector<std::function<void(std::string)>> due;
    for (auto it = range.first; it != range.second; ++it) due.push_back(std::move(it->second));
    waiters.erase(range.first, range.second);
    const std::string value = keys[key].value;
    for (auto& f : due) {
      if (stopped) return;
      f(value);
    }
  }
  void Apply(const etcd::Event& event, const std::string& key) {
    if (event.type == etcd::Event::Type::kPut) {
      keys[key] = event.kv;
      Fire(key);
    } else {
      keys.erase(key);
    }
    if (!stopped && changed) changed(event, key);
  }
  void Broken(const std::string& what) {
    if (!stopped && broken) broken(what);
  }
};

namespace {

asio::awaitable<void> RunMirror(std::shared_ptr<etcd::Client> client,
                                std::shared_ptr<EtcdMirror::Shared> s, std::string prefix,
                                std::function<void(Status)> ready) {
  for (int listing = 0; listing < 1000; ++listing) {
    auto listed = co_await client->GetPrefix(prefix);
    if (s->stopped) co_return;
    if (!listed.ok()) {
      if (ready) ready(listed.error());
      if (!ready) s->Broken(listed.error().what);
      co_return;
    }
    std::map<std::string, etcd::KeyValue> before = std::move(s->keys);
    s->keys.clear();
    for (const etcd::KeyValue& kv : listed->kvs) {
      etcd::Event put;
      put.kv = kv;
      s->Apply(put, kv.key.substr(prefix.size()));
    }
    for (const auto& [key, kv] : before) {  // gone while the watch was compacted away
      if (s->keys.count(key) == 0 && !s->stopped) {
        etcd::Event gone;
        gone.type = etcd::Event::Type::kDelete;
        gone.kv.key = kv.key;
        s->Apply(gone, key);
      }
    }
    etcd::WatchOptions options;
    options.key = prefix;
    options.range_end = etcd::PrefixEnd(prefix);
    options.start_revision = listed->revision + 1;
    auto opened = co_await client->OpenWatch(options);
    if (s->stopped) co_return;
    if (!opened.ok()) {
      if (ready) ready(opened.error());
      if (!ready) s->Broken(opened.error().what);
      co_return;
    }
    s->watch = std::move(*opened);
    if (ready) {
      auto first = std::move(ready);
      ready = nullptr;
      first(OkStatus());
      if (s->stopped) co_return;
    }
    for (;;) {
      auto batch = co_await s->watch->Next();
      if (s->stopped) co_return;
      if (!batch.ok()) {
        s->Broken(batch.error().what);
        co_return;
      }
      if (batch->compact_revision > 0) break;  // list again
      for (const etcd::Event& event : batch->events) {
        if (s->stopped) co_return;
        s->Apply(event, event.kv.key.substr(prefix.size()));
      }
    }
  }
}

}  // namespace

EtcdMirror::EtcdMirror(EtcdMember& member, std::string prefix)
    : member_(member), prefix_(std::move(prefix)), shared_(std::make_shared<Shared>()) {}

EtcdMirror::~EtcdMirror() { Stop(); }

void EtcdMirror::Start(std::function<void(Status)> ready) {
  asio::co_spawn(member_.io(), RunMirror(member_.client(), shared_, prefix_, std::move(ready)),
                 asio::detached);
}

void EtcdMirror::Stop() {
  shared_->stopped = true;
  shared_->waiters.clear();
  shared_->changed = nullptr;
  shared_->broken = nullptr;
  if (shared_->watch) shared_->watch->Cancel();
}

std::optional<std::string> EtcdMirror::Get(const std::string& key) const {
  auto it = shared_->keys.find(key);
  if (it == shared_->keys.end()) return std::nullopt;
  return it->second.value;
}

const etcd::KeyValue* EtcdMirror::Find(const std::string& key) const {
  auto it = shared_->keys.find(key);
  return it == shared_->keys.end() ? nullptr : &it->second;
}

void EtcdMirror::WaitKey(const std::string& key, std::function<void(std::string)> found) {
  if (auto value = Get(key)) {
    asio::post(member_.io(), [s = shared_, value = *value, found = std::move(found)] {
      if (!s->stopped) found(value);
    });
    return;
  }
  shared_->waiters.emplace(key, std::move(found));
}

void EtcdMirror::OnChange(Changed changed) { shared_->changed = std::move(changed); }

void EtcdMirror::OnBroken(std::function<void(std::string)> broken) {
  shared_->broken = std::move(broken);
}

}  // namespace gculaunch
