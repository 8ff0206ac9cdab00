#include "rendezvous/store.h"

#include <algorithm>
#include <charconv>

namespace gculaunch::rendezvous {
namespace {

// C strtoll rules as std::stoll applies them (spec section 5, ADD): optional leading white
// space, optional sign, then decimal digits up to the first non-digit.  No digit at all, or
// a value that does not fit in int64, is an error (std::stoll would throw).
bool ParseLeadingInteger(std::string_view text, std::int64_t& out) {
  std::size_t i = 0;
  auto is_space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
  };
  while (i < text.size() && is_space(text[i])) ++i;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
    negative = text[i] == '-';
    ++i;
  }
  const std::uint64_t limit = negative ? (std::uint64_t{1} << 63) : (std::uint64_t{1} << 63) - 1;
  const std::size_t first_digit = i;
  std::uint64_t magnitude = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    const auto digit = static_cast<std::uint64_t>(text[i] - '0');
    if (magnitude > (limit - digit) / 10) return false;
    magnitude = magnitude * 10 + digit;
  }
  if (i == first_digit) return false;
  out = negative ? static_cast<std::int64_t>(0 - magnitude) : static_cast<std::int64_t>(magnitude);
  return true;
}

// Whether a request carries the fields its op needs (the Decoder guarantees it; in-process
// callers might not).
bool WellFormed(const Request& r) {
  switch (r.op) {
    case Op::kSet:
    case Op::kAppend:
    case Op::kQueuePush:
      return r.keys.size() == 1 && r.values.size() == 1;
    case Op::kCompareSet:
      return r.keys.size() == 1 && r.values.size() == 2;
    case Op::kGet:
    case Op::kAdd:
    case Op::kWatchKey:
    case Op::kDeleteKey:
    case Op::kQueuePop:
    case Op::kQueueLen:
      return r.keys.size() == 1;
    case Op::kMultiSet:
      return r.keys.size() == r.values.size();
    default:
      return true;
  }
}

}  // namespace

Store::Store(int first_attempt, std::size_t max_value_size)
    : attempt_(first_attempt), max_value_size_(max_value_size) {}

void Store::Open(ConnId id, Scope scope) { conns_.emplace(id, Conn{scope}); }

void Store::Close(ConnId id) { conns_.erase(id); }

bool Store::IsAgentForTest(ConnId id) const {
  auto it = conns_.find(id);
  return it != conns_.end() && it->second.agent;
}

bool Store::IsParked(ConnId id) const {
  auto it = conns_.find(id);
  return it != conns_.end() && it->second.missing > 0;
}

Store::Namespace& Store::Route(const Conn& conn, std::string& key) {
  if (key.starts_with(kLauncherKeyPrefix)) return launcher_ns_;
  if (conn.scope == Scope::kAttempt) return attempt_ns_;
  // Launcher-scope connections name launcher keys without the prefix; the namespace stores
  // the prefixed form, so socket clients and in-process users see the same keys.
  key.insert(0, kLauncherKeyPrefix);
  return launcher_ns_;
}

const Store::Namespace& Store::ScopeNamespace(Scope scope) const {
  return scope == Scope::kLauncher ? launcher_ns_ : attempt_ns_;
}

std::size_t Store::NumKeys(Scope scope) const { return ScopeNamespace(scope).kv.size(); }

const std::string* Store::Find(Scope scope, std::string_view key) const {
  std::string name(key);
  const Namespace* ns = &attempt_ns_;
  if (name.starts_with(kLauncherKeyPrefix)) {
    ns = &launcher_ns_;
  } else if (scope == Scope::kLauncher) {
    ns = &launcher_ns_;
    name.insert(0, kLauncherKeyPrefix);
  }
  auto it = ns->kv.find(name);
  return it == ns->kv.end() ? nullptr : it->second.get();
}

bool Store::Present(const Namespace& ns, const std::string& key) {
  if (ns.kv.count(key) != 0) return true;
  if (ns.queues.empty()) return false;
  auto q = ns.queues.find(key);
  return q != ns.queues.end() && !q->second.empty();
}

bool Store::IsLive(const Registration& reg) const {
  auto it = conns_.find(reg.conn);
  return it != conns_.end() && it->second.wait_seq == reg.seq && it->second.missing > 0;
}

void Store::DropParkedWait(Conn& conn) {
  // Lazy: the registrations stay in their lists and are skipped as stale (seq mismatch).
  conn.missing = 0;
  conn.wait_seq = 0;
}

void Store::Park(ConnId id, Conn& conn, Namespace& ns, const std::string& key) {
  WaitList& list = ns.waiters[key];
  if (list.regs.size() >= list.compact_at) {
    std::erase_if(list.regs, [this](const Registration& r) { return !IsLive(r); });
    list.compact_at = std::max<std::size_t>(64, 2 * list.regs.size());
  }
  list.regs.push_back({id, conn.wait_seq});
}

void Store::WakeAll(Namespace& ns, const std::string& key, Effects& effects) {
  if (ns.waiters.empty()) return;
  auto it = ns.waiters.find(key);
  if (it == ns.waiters.end()) return;
  std::vector<Registration> regs = std::move(it->second.regs);
  ns.waiters.erase(it);
  for (const Registration& reg : regs) {
    auto c = conns_.find(reg.conn);
    if (c == conns_.end()) continue;
    Conn& conn = c->second;
    if (conn.wait_seq != reg.seq || conn.missing == 0) continue;
    if (--conn.missing == 0) {
      conn.wait_seq = 0;
      effects.deliveries.push_back({reg.conn, Reply()});
      AppendU8(effects.deliveries.back().bytes, 0);
    }
  }
}

void Store::WakeOne(Namespace& ns, const std::string& key, Effects& effects) {
  auto it = ns.waiters.find(key);
  if (it == ns.waiters.end()) return;
  auto& regs = it->second.regs;
  std::size_t i = 0;
  while (i < regs.size()) {
    const Registration reg = regs[i++];
    if (!IsLive(reg)) continue;
    Conn& conn = conns_.find(reg.conn)->second;
    if (--conn.missing == 0) {
      conn.wait_seq = 0;
      effects.deliveries.push_back({reg.conn, Reply()});
      AppendU8(effects.deliveries.back().bytes, 0);
    }
    break;
  }
  regs.erase(regs.begin(), regs.begin() + static_cast<std::ptrdiff_t>(i));
  if (regs.empty()) ns.waiters.erase(it);
}

void Store::Notify(Namespace& ns, const std::string& key, WatchResponse type,
                   const SharedValue& old_value, const SharedValue& new_value, Effects& effects) {
  if (ns.watchers.empty()) return;
  auto it = ns.watchers.find(key);
  if (it == ns.watchers.end()) return;
  std::erase_if(it->second, [this](ConnId id) { return conns_.count(id) == 0; });
  if (it->second.empty()) {
    ns.watchers.erase(it);
    return;
  }
  // One event for every watcher: the values are shared, not copied per watcher.
  Reply event;
  AppendU8(event, static_cast<std::uint8_t>(type));
  AppendBlob(event, key);
  AppendBlob(event, old_value);
  AppendBlob(event, new_value);
  for (ConnId id : it->second) effects.deliveries.push_back({id, event.Clone()});
}

void Store::Set(Namespace& ns, std::string& key, std::string& value, Effects& effects) {
  Put(ns, key, std::make_shared<std::string>(std::move(value)), effects);
}

void Store::Put(Namespace& ns, std::string& key, Value value, Effects& effects) {
  auto it = ns.kv.find(key);
  if (it == ns.kv.end()) {
    Notify(ns, key, WatchResponse::kKeyCreated, nullptr, value, effects);
    it = ns.kv.emplace(std::move(key), std::move(value)).first;
  } else {
    Notify(ns, key, WatchResponse::kKeyUpdated, it->second, value, effects);
    it->second = std::move(value);
  }
  WakeAll(ns, it->first, effects);
}

void Store::SetShared(Scope scope, std::string key, std::shared_ptr<std::string> value,
                      Effects& effects) {
  Conn writer{scope};
  Put(Route(writer, key), key, std::move(value), effects);
}

void Store::Handle(ConnId id, Request& request, Reply& reply, Effects& effects) {
  auto conn_it = conns_.find(id);
  if (conn_it == conns_.end()) {
    effects.close_reason = "the connection is closed or belongs to an earlier restart attempt";
    return;
  }
  if (!WellFormed(request)) {
    effects.close_reason = "malformed request " + Describe(request);
    return;
  }
  Conn& conn = conn_it->second;
  // Stale-WAIT trap (spec 6.2): a well-behaved client never sends a new request while its
  // WAIT is unanswered, so one that does has given up on it.  Forget the WAIT before its
  // STOP_WAITING could be mistaken for the first byte of the next reply.
  if (conn.missing > 0 && request.op != Op::kCancelWait) DropParkedWait(conn);
  if (!conn.keyed && !request.keys.empty()) Classify(conn, request.keys);
  Dispatch(id, conn, request, reply, effects);
}

void Store::Classify(Conn& conn, const std::vector<std::string>& keys) {
  conn.keyed = true;
  conn.agent = conn.scope == Scope::kAttempt &&
               std::all_of(keys.begin(), keys.end(), [](const std::string& key) {
                 return key.starts_with(kLauncherKeyPrefix);
               });
}

void Store::Dispatch(ConnId id, Conn& conn, Request& request, Reply& reply, Effects& effects) {
  switch (request.op) {
    case Op::kValidate:
      return;
    case Op::kPing:
      AppendU32(reply, request.word);
      return;
    case Op::kSet:
    case Op::kMultiSet:
      return HandleSet(conn, request, effects);
    case Op::kCompareSet:
      return HandleCompareSet(conn, request, reply, effects);
    case Op::kGet:
    case Op::kMultiGet:
      return HandleGet(conn, request, reply);
    case Op::kAdd:
      return HandleAdd(conn, request, reply, effects);
    case Op::kCheck:
      return HandleCheck(conn, request, reply);
    case Op::kWait:
      return HandleWait(id, conn, request, reply);
    case Op::kCancelWait:
      DropParkedWait(conn);
      AppendU8(reply, static_cast<std::uint8_t>(WaitResponse::kWaitCanceled));
      return;
    case Op::kGetNumKeys:
      AppendI64(reply, static_cast<std::int64_t>(ScopeNamespace(conn.scope).kv.size()));
      return;
    case Op::kWatchKey:
      return HandleWatchKey(id, conn, request, reply);
    case Op::kDeleteKey:
      return HandleDeleteKey(conn, request, reply, effects);
    case Op::kAppend:
      return HandleAppend(conn, request, effects);
    case Op::kQueuePush:
      return HandleQueuePush(conn, request, effects);
    case Op::kQueuePop:
      return HandleQueuePop(conn, request, reply);
    case Op::kQueueLen:
      return HandleQueueLen(conn, request, reply);
    case Op::kList:
      return HandleList(conn, reply);
  }
}

void Store::HandleSet(const Conn& conn, Request& request, Effects& effects) {
  auto& keys = request.keys;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    Set(Route(conn, keys[i]), keys[i], request.values[i], effects);
  }
}

void Store::HandleCompareSet(const Conn& conn, Request& request, Reply& reply, Effects& effects) {
  std::string& key = request.keys[0];
  Namespace& ns = Route(conn, key);
  std::string& expected = request.values[0];
  auto it = ns.kv.find(key);
  if (it == ns.kv.end()) {
    if (!expected.empty()) {
      // PyTorch "lies": nothing stored, expected echoed (moved into the reply, not copied).
      AppendBlob(reply, std::make_shared<const std::string>(std::move(expected)));
      return;
    }
    Value desired = std::make_shared<std::string>(std::move(request.values[1]));
    AppendBlob(reply, desired);
    Notify(ns, key, WatchResponse::kKeyCreated, nullptr, desired, effects);
    it = ns.kv.emplace(std::move(key), std::move(desired)).first;
    WakeAll(ns, it->first, effects);  // libuv behaviour; the classic servers do not wake
    return;
  }
  if (*it->second != expected) {
    AppendBlob(reply, it->second);
    return;
  }
  Value desired = std::make_shared<std::string>(std::move(request.values[1]));
  AppendBlob(reply, desired);
  Notify(ns, key, WatchResponse::kKeyUpdated, it->second, desired, effects);
  it->second = std::move(desired);
}

void Store::HandleGet(const Conn& conn, Request& request, Reply& reply) {
  for (auto& key : request.keys) {
    const Namespace& ns = Route(conn, key);
    auto it = ns.kv.find(key);
    AppendBlob(reply, it == ns.kv.end() ? SharedValue() : SharedValue(it->second));
  }
}

void Store::HandleAdd(const Conn& conn, Request& request, Reply& reply, Effects& effects) {
  std::string& key = request.keys[0];
  Namespace& ns = Route(conn, key);
  auto it = ns.kv.find(key);
  std::int64_t current = 0;
  if (it != ns.kv.end() && !ParseLeadingInteger(*it->second, current)) {
    effects.close_reason = "ADD to key " + QuoteForLog(key) + " whose value " +
                           QuoteForLog(*it->second) + " is not a number";
    return;
  }
  // Two's complement wrap-around, as PyTorch's servers do in practice on overflow.
  const auto next = static_cast<std::int64_t>(static_cast<std::uint64_t>(current) +
                                              static_cast<std::uint64_t>(request.delta));
  char buf[24];
  const auto end = std::to_chars(buf, buf + sizeof buf, next).ptr;
  AppendI64(reply, next);
  Put(ns, key, std::make_shared<std::string>(buf, static_cast<std::size_t>(end - buf)), effects);
}

void Store::HandleCheck(const Conn& conn, Request& request, Reply& reply) {
  bool ready = true;
  for (auto& key : request.keys) {
    if (!Present(Route(conn, key), key)) {
      ready = false;
      break;
    }
  }
  AppendU8(reply,
           static_cast<std::uint8_t>(ready ? CheckResponse::kReady : CheckResponse::kNotReady));
}

void Store::HandleWait(ConnId id, Conn& conn, Request& request, Reply& reply) {
  const std::uint64_t seq = next_wait_seq_++;
  conn.wait_seq = seq;
  conn.missing = 0;
  for (auto& key : request.keys) {
    Namespace& ns = Route(conn, key);
    if (Present(ns, key)) continue;
    ++conn.missing;
    Park(id, conn, ns, key);
  }
  if (conn.missing == 0) {
    conn.wait_seq = 0;
    AppendU8(reply, static_cast<std::uint8_t>(WaitResponse::kStopWaiting));
  }
}

void Store::HandleWatchKey(ConnId id, const Conn& conn, Request& request, Reply& reply) {
  std::string& key = request.keys[0];
  auto& ids = Route(conn, key).watchers[key];
  if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  AppendU8(reply, static_cast<std::uint8_t>(WatchResponse::kKeyCallbackRegistered));
}

void Store::HandleDeleteKey(const Conn& conn, Request& request, Reply& reply, Effects& effects) {
  std::string& key = request.keys[0];
  Namespace& ns = Route(conn, key);
  auto it = ns.kv.find(key);
  if (it == ns.kv.end()) {
    AppendI64(reply, 0);
    return;
  }
  const Value old_value = std::move(it->second);
  ns.kv.erase(it);
  AppendI64(reply, 1);
  Notify(ns, key, WatchResponse::kKeyDeleted, old_value, nullptr, effects);
}

void Store::HandleAppend(const Conn& conn, Request& request, Effects& effects) {
  std::string& key = request.keys[0];
  Namespace& ns = Route(conn, key);
  const std::string& tail = request.values[0];
  auto it = ns.kv.find(key);
  if (it == ns.kv.end()) {
    it = ns.kv.emplace(std::move(key), std::make_shared<std::string>(std::move(request.values[0])))
             .first;
  } else if (it->second->size() > max_value_size_ ||
             tail.size() > max_value_size_ - it->second->size()) {
    effects.close_reason = "APPEND to key " + QuoteForLog(key) + " would grow its value to " +
                           std::to_string(it->second->size() + tail.size()) +
                           " bytes, past the limit of " + std::to_string(max_value_size_) +
                           " bytes per value";
    return;
  } else if (it->second.use_count() == 1) {
    it->second->append(tail);  // no reply shares the value: growing it in place is safe
  } else {
    auto grown = std::make_shared<std::string>();
    grown->reserve(it->second->size() + tail.size());
    grown->append(*it->second).append(tail);
    it->second = std::move(grown);
  }
  WakeAll(ns, it->first, effects);
}

void Store::HandleQueuePush(const Conn& conn, Request& request, Effects& effects) {
  std::string& key = request.keys[0];
  Namespace& ns = Route(conn, key);
  ns.queues[key].push_back(std::move(request.values[0]));
  WakeOne(ns, key, effects);
}

void Store::HandleQueuePop(const Conn& conn, Request& request, Reply& reply) {
  std::string& key = request.keys[0];
  Namespace& ns = Route(conn, key);
  auto it = ns.queues.find(key);
  const std::size_t length = it == ns.queues.end() ? 0 : it->second.size();
  AppendI64(reply, static_cast<std::int64_t>(length));
  if (length > 0) {
    AppendBlob(reply, std::make_shared<const std::string>(std::move(it->second.front())));
    it->second.pop_front();
    if (it->second.empty()) ns.queues.erase(it);
  }
}

void Store::HandleQueueLen(const Conn& conn, Request& request, Reply& reply) {
  std::string& key = request.keys[0];
  const Namespace& ns = Route(conn, key);
  auto it = ns.queues.find(key);
  AppendI64(reply, static_cast<std::int64_t>(it == ns.queues.end() ? 0 : it->second.size()));
}

void Store::HandleList(const Conn& conn, Reply& reply) const {
  const Namespace& ns = ScopeNamespace(conn.scope);
  std::vector<const std::string*> names;
  names.reserve(ns.kv.size());
  for (const auto& [key, value] : ns.kv) names.push_back(&key);
  std::sort(names.begin(), names.end(),
            [](const std::string* a, const std::string* b) { return *a < *b; });
  AppendI64(reply, static_cast<std::int64_t>(names.size()));
  const std::size_t strip = conn.scope == Scope::kLauncher ? kLauncherKeyPrefix.size() : 0;
  for (const std::string* name : names) {
    AppendBlob(reply, std::string_view(*name).substr(strip));
  }
}

Result<std::vector<ConnId>> Store::BeginAttempt(int attempt) {
  if (attempt <= attempt_) {
    return Error{"restart attempt " + std::to_string(attempt) +
                     " does not come after the current attempt " + std::to_string(attempt_),
                 "begin attempts in increasing order"};
  }
  std::vector<ConnId> dropped;
  for (auto it = conns_.begin(); it != conns_.end();) {
    if (it->second.scope == Scope::kAttempt && !it->second.agent) {
      dropped.push_back(it->first);
      it = conns_.erase(it);
    } else {
      ++it;
    }
  }
  std::sort(dropped.begin(), dropped.end());
  attempt_ns_ = Namespace{};
  attempt_ = attempt;
  return dropped;
}

}  // namespace gculaunch::rendezvous
