// Store: the in-memory semantics of the TCPStore server, with no I/O at all.
//
// The caller (the server's sessions, the tests, the fuzzer) registers connections by id,
// feeds each decoded Request, and carries out what comes back: reply bytes for the
// requesting connection, bytes for *other* connections (a parked WAIT's STOP_WAITING, a
// 1.x WATCH_KEY event), and "close this connection" with a one-line reason.  Rules follow
// the server section of docs/tcpstore-protocol.md; where PyTorch's servers differ
// from each other the spec's recommendation is taken:
//   * GET / MULTI_GET of a missing key: empty blob (libuv), not a close;
//   * COMPARE_SET that creates a key wakes waiters (libuv);
//   * ADD on a value that does not start with a number: close that connection, key
//     unchanged; values are parsed with strtoll rules and stored as shortest decimal text;
//   * stale-WAIT trap (spec 6.2): any request other than CANCEL_WAIT that arrives while the
//     connection has a parked WAIT drops that WAIT silently first (its STOP_WAITING is never
//     sent), so a 1.x client that timed out is not handed a stale byte later;
//   * WATCH_KEY (1.x callback connections) is implemented: ack 3, then events;
//   * queue ops (2.8+) and LIST are implemented as the libuv server does.
//
// Key spaces.  There is one namespace for the current restart attempt and one persistent
// namespace for the launcher's own keys:
//   * every connection is opened either in the attempt scope (bound to the attempt current
//     at Open, which is what sockets get) or in the launcher scope (in-process users);
//   * a key that starts with kLauncherKeyPrefix ("gculaunch/") always lives in the launcher
//     namespace, whichever connection sends it.  PyTorch clients never send such keys:
//     TCPStore puts '/' in front of every key except its own "init/";
//   * any other key lives in the connection's scope: the attempt namespace, or, for a
//     launcher-scope connection, the launcher namespace as if it had the prefix (in-process
//     users say "run_id", socket clients "gculaunch/run_id": the same key);
//   * GETNUMKEYS and LIST count the connection's own scope only.
// BeginAttempt(n) forgets every attempt-scope connection and drops the attempt namespace
// (1.x keys under /worker/attempt_<n> and unprefixed 2.x keys alike), so a dead rank's late
// bytes can never reach the next attempt: the store no longer knows its connection, and
// Handle() on an unknown id asks the caller to close it.  Launcher-scope connections and
// the launcher namespace survive.
//
// Node agents.  The other nodes' gculaunch processes reach the launcher namespace over
// sockets, on the same port as the ranks, and their connections must outlive restart
// attempts.  A socket connection whose first request with keys names only launcher keys
// ("gculaunch/...") is an agent connection: it keeps the attempt scope for unprefixed keys
// but BeginAttempt does not drop it.  A rank never qualifies (PyTorch clients never send
// such keys), and a connection that first used an ordinary key never becomes one.
//
// Values are immutable once stored and shared with the replies that name them (codec.h,
// Reply): a GET or MULTI_GET reply holds references, not copies, so its memory is O(keys),
// and a watch event shares the old and the new value among all watchers.  APPEND grows a
// value in place only while no reply shares it, and never past max_value_size.
//
// Costs: every request is O(size of its keys and values) plus O(1) hash operations, plus:
//   * a request that creates or changes a key (SET, MULTI_SET, COMPARE_SET, ADD, APPEND)
//     wakes that key's waiters and, like DELETE_KEY, tells its watchers: O(waiters +
//     watchers of that key); QUEUE_PUSH wakes one waiter, skipping stale registrations;
//   * WATCH_KEY looks for the connection among the key's watchers: O(watchers of that key);
//   * LIST sorts the names of the connection's scope: O(n log n) for n keys.
// Parked WAITs are removed lazily (a cancelled or closed waiter leaves a stale registration
// that is skipped and periodically compacted), so cancelling or closing is O(1).  Each
// handler below names its costs.
//
// Thread safety: none; one thread (the io_context's) owns a Store.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "rendezvous/codec.h"

namespace gculaunch::rendezvous {

/// Identifies one connection for the lifetime of the process; never reused.
using ConnId = std::uint64_t;

/// Keys with this prefix live in the launcher's persistent namespace.
inline constexpr std::string_view kLauncherKeyPrefix = "gculaunch/";

/// Which namespace a connection's ordinary (unprefixed) keys address.
enum class Scope : std::uint8_t {
  kAttempt,   ///< the restart attempt current when the connection was opened
  kLauncher,  ///< the launcher's persistent namespace
};

/// Bytes to send to a connection other than the requesting one.
struct Delivery {
  ConnId conn;
  Reply bytes;
};

/// What a request caused besides its own reply.  The caller clears it between uses.
struct Effects {
  std::vector<Delivery> deliveries;  ///< in the order they must be sent
  std::string close_reason;          ///< non-empty: close the requester after its reply

  bool close() const { return !close_reason.empty(); }
  void Clear() {
    deliveries.clear();
    close_reason.clear();
  }
};

class Store {
 public:
  /// `max_value_size` bounds what APPEND may grow a value to (requests are bounded by the
  /// codec's Limits).
  explicit Store(int first_attempt = 0, std::size_t max_value_size = kDefaultMaxValueSize);
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  /// Registers connection `id` in `scope`.  REQUIRES: id was never opened before.
  void Open(ConnId id, Scope scope = Scope::kAttempt);
  /// Forgets a connection and its parked WAIT and watches.  Unknown ids are ignored.
  void Close(ConnId id);
  /// Whether connection `id` is open (the tests' view; the store itself never asks).
  bool IsOpenForTest(ConnId id) const { return conns_.count(id) != 0; }
  /// True for a node agent's connection (see the file comment).
  bool IsAgentForTest(ConnId id) const;

  /// Handles one request of `id`, appending its reply bytes (if any) to `reply` and any
  /// deliveries / close reason to `effects`.  May move strings out of `request`.  An unknown
  /// id (never opened, closed, or dropped by BeginAttempt) only sets a close reason.
  /// Replies share stored values (codec.h, Reply): a value is never changed once stored.
  void Handle(ConnId id, Request& request, Reply& reply, Effects& effects);

  /// SET for an in-process writer that stores one value under many keys (node 0 admits every
  /// node to the same plan): `value` may already be stored elsewhere and is shared, not
  /// copied; it must not change afterwards (APPEND copies a shared value).  `key` is named as
  /// a connection of `scope` names it.  Wakes and tells as SET does.  O(key) plus the wakes.
  void SetShared(Scope scope, std::string key, std::shared_ptr<std::string> value,
                 Effects& effects);

  /// Starts restart attempt `attempt`: drops the attempt namespace and forgets every
  /// attempt-scope connection, returning their ids; the caller must close them.
  /// Fails (changing nothing) unless attempt > this->attempt().
  Result<std::vector<ConnId>> BeginAttempt(int attempt);
  int attempt() const { return attempt_; }

  // ---- introspection: for tests, metrics and in-process readers ----
  /// True while `id` has a parked WAIT.
  bool IsParked(ConnId id) const;
  std::size_t num_connections() const { return conns_.size(); }
  /// Number of keys in the namespace of `scope`.
  std::size_t NumKeys(Scope scope) const;
  /// The value of `key` as a connection of `scope` would see it, or nullptr.
  const std::string* Find(Scope scope, std::string_view key) const;

 private:
  struct Registration {
    ConnId conn;
    std::uint64_t seq;  ///< the WAIT it belongs to; stale once the connection's seq moved on
  };
  struct WaitList {
    std::vector<Registration> regs;  ///< in arrival order: waiters are woken in this order
    std::size_t compact_at = 64;     ///< compact stale registrations when regs reaches this
  };
  /// A stored value.  Only the store changes it, and only while no reply shares it (APPEND).
  using Value = std::shared_ptr<std::string>;
  struct Namespace {
    std::unordered_map<std::string, Value> kv;
    std::unordered_map<std::string, WaitList> waiters;
    std::unordered_map<std::string, std::vector<ConnId>> watchers;  ///< 1.x WATCH_KEY
    std::unordered_map<std::string, std::deque<std::string>> queues;
  };
  struct Conn {
    Scope scope;
    bool keyed = false;          ///< a request with keys was seen (decides `agent`)
    bool agent = false;          ///< a node agent's connection: kept by BeginAttempt
    std::uint32_t missing = 0;   ///< keys of the parked WAIT still missing; 0: none parked
    std::uint64_t wait_seq = 0;  ///< id of the parked WAIT (0: none)
  };

  /// The namespace `key` lives in for `conn`; rewrites `key` to its stored form.
  Namespace& Route(const Conn& conn, std::string& key);
  const Namespace& ScopeNamespace(Scope scope) const;
  static bool Present(const Namespace& ns, const std::string& key);
  bool IsLive(const Registration& reg) const;

  void DropParkedWait(Conn& conn);
  void Park(ConnId id, Conn& conn, Namespace& ns, const std::string& key);
  /// After `key` was created or changed in `ns`: wake every waiter of it.
  void WakeAll(Namespace& ns, const std::string& key, Effects& effects);
  /// After a QUEUE_PUSH: wake the first live waiter of `key` only.
  void WakeOne(Namespace& ns, const std::string& key, Effects& effects);
  void Notify(Namespace& ns, const std::string& key, WatchResponse type,
              const SharedValue& old_value, const SharedValue& new_value, Effects& effects);
  /// SET semantics shared by SET and MULTI_SET; takes the strings.
  void Set(Namespace& ns, std::string& key, std::string& value, Effects& effects);
  /// Stores `value` under `key` (created or replaced), telling watchers and waking waiters.
  void Put(Namespace& ns, std::string& key, Value value, Effects& effects);

  /// The first request with keys decides whether `conn` is a node agent's.
  static void Classify(Conn& conn, const std::vector<std::string>& keys);
  /// Hands a checked request to its op's handler.  The handlers follow spec section 5 and
  /// may move strings out of `request`.
  void Dispatch(ConnId id, Conn& conn, Request& request, Reply& reply, Effects& effects);
  /// SET and MULTI_SET: O(values) plus waking and telling each key's waiters and watchers.
  void HandleSet(const Conn& conn, Request& request, Effects& effects);
  /// Creates or replaces when `expected` matches; replies with the value now stored (or the
  /// expected one echoed for a missing key).  Creating wakes waiters; both tell watchers.
  void HandleCompareSet(const Conn& conn, Request& request, Reply& reply, Effects& effects);
  /// GET and MULTI_GET: a blob per key, empty for a missing one.  O(keys): large values are
  /// shared, not copied.
  void HandleGet(const Conn& conn, Request& request, Reply& reply);
  /// Adds to a decimal value (missing: 0); closes the connection when it is not a number.
  /// O(1) plus waking and telling the key's waiters and watchers.
  void HandleAdd(const Conn& conn, Request& request, Reply& reply, Effects& effects);
  /// Ready when every key holds a value or a non-empty queue.  O(keys).
  void HandleCheck(const Conn& conn, Request& request, Reply& reply);
  /// Answers at once when every key is present, else parks the WAIT on the missing keys
  /// (amortized O(1) per key, compaction included).
  void HandleWait(ConnId id, Conn& conn, Request& request, Reply& reply);
  /// 1.x WATCH_KEY: registers `id` once.  O(watchers of the key).
  void HandleWatchKey(ConnId id, const Conn& conn, Request& request, Reply& reply);
  /// Replies 1 when the key existed (and tells its watchers), else 0.
  void HandleDeleteKey(const Conn& conn, Request& request, Reply& reply, Effects& effects);
  /// Appends to the value (missing: creates it) and wakes the key's waiters.  A value that
  /// would grow past max_value_size closes the connection instead, the value unchanged.
  /// O(appended bytes) while no reply shares the value, else O(value) (a new copy).
  void HandleAppend(const Conn& conn, Request& request, Effects& effects);
  /// Appends to the key's queue and wakes its first live waiter.
  void HandleQueuePush(const Conn& conn, Request& request, Effects& effects);
  /// Replies with the queue's length, then its first item (removed) when there is one.  O(1).
  void HandleQueuePop(const Conn& conn, Request& request, Reply& reply);
  /// Replies with the queue's length.  O(1).
  void HandleQueueLen(const Conn& conn, Request& request, Reply& reply);
  /// Every key of the connection's scope, sorted, without the launcher prefix.
  /// O(n log n) for n keys.
  void HandleList(const Conn& conn, Reply& reply) const;

  int attempt_;
  std::size_t max_value_size_;
  std::uint64_t next_wait_seq_ = 1;
  std::unordered_map<ConnId, Conn> conns_;
  Namespace attempt_ns_;
  Namespace launcher_ns_;
};

}  // namespace gculaunch::rendezvous
