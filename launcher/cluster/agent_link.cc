#include "launcher/cluster/agent_link.h"

#include <spdlog/logger.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <deque>
#include <optional>

#include "base/exit_codes.h"
#include "base/text.h"
#include "launcher/cluster/job_protocol.h"
#include "launcher/cluster/liveness.h"
#include "launcher/cluster/net_address.h"
#include "launcher/sys/socket_owner.h"
#include "rendezvous/client.h"
#include "rendezvous/join_auth.h"
#include "rendezvous/proxy.h"
#include "rendezvous/server.h"

namespace gculaunch {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
template <typename T>
using Task = asio::awaitable<T>;

namespace {

auto Nothrow(boost::system::error_code& ec) {
  return asio::redirect_error(asio::use_awaitable, ec);
}

}  // namespace

// ---------------------------------- LocalAgentLink ----------------------------------

LocalAgentLink::LocalAgentLink(asio::io_context& io, rendezvous::Server& server)
    : io_(io), server_(server) {}

void LocalAgentLink::Set(const std::string& key, const std::string& value, Done done) {
  if (open_) server_.Set(key, value);
  asio::post(io_, [done = std::move(done)] { done(OkStatus()); });
}

void LocalAgentLink::CompareSet(const std::string& key, const std::string& expected,
                                const std::string& desired, Value done) {
  std::string now = open_ ? server_.CompareSet(key, expected, desired) : "";
  asio::post(io_, [done = std::move(done), now = std::move(now)] { done(now); });
}

void LocalAgentLink::Get(const std::string& key, Value done) {
  std::string value = open_ ? server_.Get(key).value_or("") : "";
  asio::post(io_, [done = std::move(done), value = std::move(value)] { done(value); });
}

void LocalAgentLink::Add(const std::string& key, std::int64_t delta, Value done) {
  Result<std::string> sum = Error{"the store is closed", ""};
  if (open_) {
    auto added = server_.Add(key, delta);
    sum = added.ok() ? Result<std::string>(std::to_string(*added))
                     : Result<std::string>(added.error());
  }
  asio::post(io_, [done = std::move(done), sum = std::move(sum)] { done(sum); });
}

void LocalAgentLink::WaitGet(const std::string& key, Value done) {
  server_.AsyncWait({key}, lifetime_.Wrap([this, key, done = std::move(done)](bool ok) {
    if (!ok || !open_) {
      done(Error{"the store stopped while waiting for " + key, ""});
      return;
    }
    done(server_.Get(key).value_or(""));
  }));
}

void LocalAgentLink::Close() { open_ = false; }

// ---------------------------------- RemoteAgentLink ----------------------------------

// The remote link's state, shared with its coroutines so that they never outlive it.
class RemoteLinkCore : public std::enable_shared_from_this<RemoteLinkCore> {
 public:
  RemoteLinkCore(asio::io_context& io, RemoteLinkOptions options, spdlog::logger& log)
      : io_(io),
        options_(std::move(options)),
        log_(log),
        wake_(io),
        progress_timer_(io),
        proxy_timer_(io),
        rule_(job::SilenceRule::ForMasterNode(options_.node_timeout)),
        lag_(options_.silence_check) {}

  void SetBeatKey(const std::string& key, const std::string& also_read) {
    beat_read_.reset();
    if (also_read.empty()) {
      beat_ = [wire = job::KeyForSocket(key)](rendezvous::Client& c) -> Task<Result<std::string>> {
        auto n = co_await c.Add(wire, 1);
        if (!n.ok()) co_return n.error();
        co_return std::to_string(*n);
      };
      return;
    }
    // Runs inside Pump(), which holds the core.
    beat_ = [this, wire = job::KeyForSocket(key), read = job::KeyForSocket(also_read)](
                rendezvous::Client& c) -> Task<Result<std::string>> {
      auto value = co_await c.AddThenGet(wire, 1, read);
      if (value.ok()) beat_read_.emplace(*value, Clock::now());
      co_return value;
    };
  }

  struct Op {
    std::function<Task<Result<std::string>>(rendezvous::Client&)> run;
    AgentLink::Value deliver;
  };

  std::string endpoint() const { return FormatEndpoint(options_.host, options_.port); }

  rendezvous::ClientOptions ClientOpts(std::chrono::milliseconds timeout) {
    rendezvous::ClientOptions o;
    o.host = via_proxy_ ? options_.proxy->address() : options_.host;
    o.port = static_cast<std::uint16_t>(via_proxy_ ? options_.proxy->port() : options_.port);
    o.dialect = rendezvous::Dialect::kV2;
    o.connect_timeout = timeout;
    o.attempt_timeout = std::chrono::seconds(2);
    o.initial_backoff = options_.initial_backoff;
    o.max_backoff = options_.max_backoff;
    o.keepalive = true;
    o.keepalive_idle = options_.keepalive_idle;
    o.keepalive_interval = options_.keepalive_interval;
    o.keepalive_probes = options_.keepalive_probes;
    o.user_timeout = options_.user_timeout;
    // This process's own proxy serves every connection it accepts: the handshake rides with
    // the first request instead of costing node 0 one more reply per stream.
    o.handshake_with_first_request = via_proxy_;
    return o;
  }

  Task<void> DoConnect(AgentLink::Done done) {
    auto self = shared_from_this();
    const auto start = Clock::now();
    connecting_ = true;
    asio::co_spawn(io_, Progress(start), asio::detached);
    if (options_.proxy != nullptr && !options_.proxy->lost()) {
      Status routed = co_await ThroughProxy();
      if (closed_) co_return;
      if (!routed.ok()) {
        connecting_ = false;
        progress_timer_.cancel();
        done(routed.error());
        co_return;
      }
    }
    // What is left of the deadline (the proxy may have spent some of it).
    const auto left =
        std::max(std::chrono::milliseconds(1),
                 options_.connect_timeout -
                     std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start));
    // Through the proxy the listener is this process's own and already serving: a refusal
    // means the proxy was lost right after it came up, which is not worth the whole deadline.
    rendezvous::ClientOptions o =
        ClientOpts(via_proxy_ ? std::min(left, std::chrono::milliseconds(10000)) : left);
    // Weak: the client keeps its options, and the core keeps the client.
    o.on_attempt_failed = [weak = std::weak_ptr<RemoteLinkCore>(self)](int attempt,
                                                                       const std::string& why) {
      if (auto core = weak.lock()) {
        core->attempts_ = attempt;
        core->last_error_ = why;
      }
    };
    auto control = co_await rendezvous::Client::Connect(o);
    connecting_ = false;
    progress_timer_.cancel();
    if (!control.ok()) {
      const int attempts = std::max(attempts_, 1);
      done(Error{"could not reach the master node's gculaunch at MASTER_ADDR:MASTER_PORT " +
                     endpoint() + " after " + std::to_string(attempts) +
                     (attempts == 1 ? " attempt" : " attempts") + " in " +
                     Seconds(Clock::now() - start) + " (--rdzv-timeout " +
                     Seconds(options_.connect_timeout) +
                     "); last error: " + (last_error_.empty() ? control.error().what : last_error_),
                 "check that gculaunch runs on node 0 (RANK=0), that MASTER_ADDR and "
                 "MASTER_PORT name that node and port, and that no firewall blocks the port; "
                 "raise --rdzv-timeout if node 0 starts later"});
      co_return;
    }
    control_.emplace(std::move(*control));
    // Through the proxy, this node's address on the route to node 0 is its upstream's.
    const int route_fd = via_proxy_ ? options_.proxy->upstream_handle() : control_->native_handle();
    if (auto addr = LocalAddressOf(route_fd); addr.ok()) local_address_ = *addr;
    // The second connection is made while the first proves the job secret: every round
    // trip of a node's join is one more reply from node 0's one thread per node.
    Status control_ready = OkStatus();
    Status watch_ready = OkStatus();
    using asio::experimental::awaitable_operators::operator&&;
    co_await (SetUp(*control_, control_ready) && ConnectWatch(watch_ready));
    for (Status* ready : {&control_ready, &watch_ready}) {
      if (!ready->ok()) {
        done(ready->error());
        co_return;
      }
    }
    log_.info(
        "connected to the master node at {}{} after {} in {} (this node's address on that "
        "route: {})",
        endpoint(),
        via_proxy_ ? " through this node's store proxy (port " +
                         std::to_string(options_.proxy->port()) + ")"
                   : std::string(),
        attempts_ + 1 == 1 ? std::string("1 attempt") : std::to_string(attempts_ + 1) + " attempts",
        Seconds(Clock::now() - start), local_address_);
    asio::co_spawn(io_, Pump(), asio::detached);
    done(OkStatus());
  }

  // The watch connection, made once the control connection is up.  The master just
  // answered: it needs no long deadline.
  Task<void> ConnectWatch(Status& ready) {
    auto self = shared_from_this();
    rendezvous::ClientOptions watch_options = ClientOpts(std::chrono::seconds(10));
    auto watch = co_await rendezvous::Client::Connect(std::move(watch_options));
    if (!watch.ok()) {
      ready = Error{"connected to the master node at " + endpoint() +
                        " but a second connection failed: " + watch.error().what,
                    "check the master node's gculaunch and the network between the nodes"};
      co_return;
    }
    watch_.emplace(std::move(*watch));
    co_await SetUp(*watch_, ready);
  }

  // Each connection, before anything else: who serves it (check_listener_owner), then the
  // proof of the job secret, and the first request, which names only launcher keys: the
  // store keeps such agent connections across the ranks' attempts, so this is said before a
  // restart can begin (a new node 0 begins one as soon as every node joined).  That request
  // rides in the handshake's last write (join_auth.h).  Through the proxy, the listener is
  // this process's own, and the upstream's server end was checked once (ThroughProxy).
  Task<void> SetUp(rendezvous::Client& c, Status& ready) {
    auto self = shared_from_this();
    if (options_.check_listener_owner && !via_proxy_) {
      ready = CheckListenerOwner(c.native_handle());
      if (!ready.ok()) co_return;
    }
    std::string hello = job::KeyForSocket(job::kMissingKey);
    const rendezvous::JoinOutcome joined =
        co_await rendezvous::JoinNodeZero(c, options_.secret, std::move(hello));
    if (!joined.ok()) {
      ready = JoinError(joined);
      co_return;
    }
    if (!joined.then.ok()) {
      ready = Error{"connected to the master node at " + endpoint() +
                        " but it did not answer: " + joined.then.error().what,
                    "check the master node's gculaunch and the network between the nodes"};
    }
  }

  // --store-proxy: waits for this node's proxy to reach node 0, then both connections go
  // through it as streams of its one upstream connection.  A proxy that could not reach node
  // 0 (a wrong secret, a deadline) or was lost leaves this node's gculaunch to connect
  // directly, which then fails or succeeds as without a proxy, with its own words and exit
  // code.
  Task<Status> ThroughProxy() {
    auto self = shared_from_this();
    waiting_proxy_ = true;
    options_.proxy->WhenUp([weak = weak_from_this()](const std::string& lost) {
      if (auto core = weak.lock()) {
        core->proxy_lost_ = lost;
        core->proxy_timer_.cancel();
      }
    });
    while (!proxy_lost_ && !closed_) {
      boost::system::error_code ec;
      proxy_timer_.expires_at(Clock::time_point::max());
      co_await proxy_timer_.async_wait(Nothrow(ec));
    }
    waiting_proxy_ = false;
    if (closed_) co_return OkStatus();
    if (!proxy_lost_->empty()) {
      log_.info("this node's store proxy cannot reach the master node ({}): connecting directly",
                *proxy_lost_);
      co_return OkStatus();
    }
    if (options_.check_listener_owner) {
      Status owner = CheckListenerOwner(options_.proxy->upstream_handle());
      if (!owner.ok()) co_return owner;
    }
    via_proxy_ = true;
    co_return OkStatus();
  }

  // Rule 3 of store_host.h: the port was taken on this host, so the process that answers is
  // looked up through the server end of this very connection (no look at the port that a
  // close and a rebind could change afterwards).
  Status CheckListenerOwner(int fd) const {
    const std::string port = std::to_string(options_.port);
    auto owner = sys::PeerSocketOwner(fd);
    if (!owner.ok() || !owner->has_value() || **owner == sys::kNoOwner) {
      std::string why = "the server end of the connection is closing";
      if (!owner.ok()) {
        why = owner.error().what;
      } else if (!owner->has_value()) {
        why = "the server end of the connection is not in this network namespace";
      }
      return Error{"cannot tell which user serves the store's port " + port + " on this host (" +
                       why + "): this node does not join a store whose owner it cannot check",
                   "start the launcher of the endpoint's host first, or say which node hosts "
                   "the store with --rdzv-conf is_host=true|false",
                   exit_code::kUsage};
    }
    if (sys::IsJobUserOrRoot(**owner)) return OkStatus();
    return Error{"the store's port " + port + " on this host is held by uid " +
                     std::to_string(**owner) + ", not by this job's user (uid " +
                     std::to_string(::geteuid()) +
                     ") or root: this node does not join another user's store",
                 "stop uid " + std::to_string(**owner) + "'s process on port " + port +
                     " or choose another port in --rdzv-endpoint (every node the same)",
                 exit_code::kUsage};
  }

  // The job secret's handshake (rendezvous/join_auth.h: node 0 proves it first): each way
  // it can fail, worded for the user of this node.
  Status JoinError(const rendezvous::JoinOutcome& joined) const {
    using rendezvous::JoinStep;
    const std::string at = "the master node at " + endpoint();
    switch (joined.step) {
      case JoinStep::kOk:
        return OkStatus();
      case JoinStep::kNoAnswer:
        return Error{"connected to " + at + " but it did not answer: " + joined.detail,
                     "check the master node's gculaunch and the network between the nodes"};
      case JoinStep::kNodeZeroHasNoSecret:
        return Error{at + " runs without a job secret, but this node has one "
                          "(--job-secret-file): the nodes cannot form a job",
                     "give every node the same --job-secret-file, or none", exit_code::kUsage};
      case JoinStep::kJoinerHasNoSecret:
        return Error{at + " requires a job secret, but this node has none: the nodes cannot "
                          "form a job",
                     "give every node the same --job-secret-file (or GCULAUNCH_JOB_SECRET_FILE)",
                     exit_code::kUsage};
      case JoinStep::kNoRandom:
        return Error{
            "no random bytes for a nonce to check the master node's proof of the job "
            "secret (OpenSSL RAND_bytes failed)",
            "check the system's random number source and start again"};
      case JoinStep::kNodeZeroUnproven:
        return Error{at + " did not prove that it holds the job secret (" + joined.detail +
                         "): it runs an older gculaunch, whose node 0 does not prove itself, "
                         "or it is not the job's node 0",
                     "run the same gculaunch version on every node", exit_code::kUsage};
      case JoinStep::kNodeZeroWrong:
        return Error{at + " failed to prove that it holds the job secret: its "
                          "--job-secret-file differs from this node's, it has none, or what "
                          "answers there is not the job's node 0",
                     "give every node the same secret file, and check that "
                     "MASTER_ADDR:MASTER_PORT reaches node 0's gculaunch",
                     exit_code::kUsage};
      case JoinStep::kRefused:
        return Error{at + " refused this node's proof of the job secret (" + joined.detail +
                         "): this node's --job-secret-file differs from node 0's",
                     "give every node the same secret file", exit_code::kUsage};
    }
    return Error{"unknown step of the job secret's handshake", "please report it"};
  }

  // A progress line every progress_period while connecting.
  Task<void> Progress(Clock::time_point start) {
    auto self = shared_from_this();
    asio::ip::tcp::resolver resolver(io_);
    while (connecting_ && !closed_) {
      boost::system::error_code ec;
      progress_timer_.expires_after(options_.progress_period);
      co_await progress_timer_.async_wait(Nothrow(ec));
      if (!connecting_ || closed_) co_return;
      std::string resolved;
      auto found = co_await resolver.async_resolve(options_.host, std::to_string(options_.port),
                                                   Nothrow(ec));
      if (ec) {
        resolved = "not resolvable yet: " + ec.message();
      } else {
        for (const auto& entry : found) {
          const std::string a = entry.endpoint().address().to_string();
          if (resolved.find(a) != std::string::npos) continue;
          resolved += (resolved.empty() ? "resolved to " : ", ") + a;
        }
      }
      if (!connecting_ || closed_) co_return;
      const std::string why = options_.not_host_why.empty()
                                  ? ""
                                  : "; this node does not host the store: " + options_.not_host_why;
      // While the proxy connects, its attempts are this node's.
      const int attempts = waiting_proxy_ ? options_.proxy->connect_attempts() : attempts_;
      const std::string& last = waiting_proxy_ ? options_.proxy->last_connect_error() : last_error_;
      log_.info(
          "waiting for the master node at {} ({}): {} attempt(s) in {}, last: {}; node 0 "
          "may still be starting, waiting up to {} (--rdzv-timeout){}",
          endpoint(), resolved, attempts, Seconds(Clock::now() - start), last.empty() ? "-" : last,
          Seconds(options_.connect_timeout), why);
    }
  }

  // Runs the control connection's queue; heartbeats when idle.
  Task<void> Pump() {
    auto self = shared_from_this();
    auto next_beat = Clock::now() + options_.heartbeat_interval;
    while (!closed_ && !lost_) {
      if (!queue_.empty()) {
        Op op = std::move(queue_.front());
        queue_.pop_front();
        auto result = co_await Run(op.run);
        if (!result.ok()) {
          Lost(result.error().what);
          result = Error{lost_what_, ""};
        }
        auto deliver = std::move(op.deliver);
        asio::post(io_, [deliver, result = std::move(result)] { deliver(result); });
        continue;
      }
      if (beating_ && (beat_now_ || Clock::now() >= next_beat)) {
        beat_now_ = false;
        // Named, not a temporary: g++ 12 mishandles temporaries that live across co_await.
        auto result = co_await Run(beat_);
        if (!result.ok()) Lost(result.error().what);
        next_beat = Clock::now() + options_.heartbeat_interval;
        continue;
      }
      master_.Idle();  // nothing asked: the master has nothing to say
      wake_.expires_at(beating_ ? next_beat : Clock::now() + std::chrono::hours(24));
      boost::system::error_code ec;
      co_await wake_.async_wait(Nothrow(ec));
    }
    FailQueue();
  }

  // One control request, for as long as the master is not silent past the bound.
  Task<Result<std::string>> Run(
      const std::function<Task<Result<std::string>>(rendezvous::Client&)>& run) {
    using asio::experimental::awaitable_operators::operator||;
    master_.Expect(Clock::now(), lag_.total());
    auto done = co_await (run(*control_) || Silence());
    if (done.index() == 1) {
      LostSilent(std::get<1>(done));
      co_return Error{lost_what_, ""};
    }
    HeardMaster();
    co_return std::move(std::get<0>(done));
  }

  // A reply on either connection; after a warning, says how long the silence lasted.
  void HeardMaster() {
    const auto now = Clock::now();
    if (warned_) {
      log_.info("the master node's gculaunch at {} answered again after {} of silence", endpoint(),
                Seconds(master_.Silent(now, lag_.total())));
      warned_ = false;
    }
    master_.Heard(now, lag_.total());
  }

  // Half the bound without an answer: said once, so that a slow master shows before it is
  // lost (and the log tells how long the pauses were when it was not).
  void WarnSilent(Clock::time_point now) {
    const auto silent = master_.Silent(now, lag_.total());
    const auto bound = master_.Bound(rule_);
    if (warned_ || silent < bound / 2) return;
    warned_ = true;
    log_.warn(
        "the master node's gculaunch at {} has not answered for {} (stopped, or starved of "
        "CPU?); it is lost after {} of silence (--node-timeout {})",
        endpoint(), Seconds(silent), Seconds(bound), Seconds(rule_.ceiling, -1));
  }

  // Returns only once the master has been silent past the bound (liveness.h), with the
  // reason; a reply first cancels it.  This process's own lateness, measured by this loop's
  // ticks, does not count, and bytes waiting in either socket mean the master spoke.
  Task<std::string> Silence() {
    asio::steady_timer timer(io_);
    lag_.Resume(Clock::now());
    for (;;) {
      timer.expires_after(options_.silence_check);
      boost::system::error_code ec;
      co_await timer.async_wait(Nothrow(ec));
      if (ec == asio::error::operation_aborted) co_return std::string();  // the reply won
      const auto now = Clock::now();
      lag_.Tick(now);
      if (!master_.Lost(now, lag_.total(), rule_)) {
        WarnSilent(now);
        continue;
      }
      if (Waiting(control_) || Waiting(watch_)) {
        HeardMaster();  // its answer is there; this process was late to read it
        continue;
      }
      co_return "its gculaunch at " + endpoint() + " went silent: " +
          job::SilenceText(master_.Silent(now, lag_.total()), master_.Bound(rule_), rule_);
    }
  }

  static bool Waiting(std::optional<rendezvous::Client>& client) {
    return client && BytesWaiting(client->native_handle()) > 0;
  }

  void Enqueue(Op op) {
    if (lost_ || closed_ || !control_) {
      auto deliver = std::move(op.deliver);
      asio::post(io_, [deliver, what = lost_what_] {
        deliver(Error{what.empty() ? "not connected to the master node" : what, ""});
      });
      return;
    }
    queue_.push_back(std::move(op));
    wake_.cancel();
  }

  Task<void> DoWaitGet(std::string key, AgentLink::Value done) {
    auto self = shared_from_this();
    const std::string wire = job::KeyForSocket(key);
    Result<std::string> result = Error{"not connected to the master node", ""};
    if (watch_ && !lost_ && !closed_) {
      std::vector<std::string> keys{wire};
      Status waited = co_await watch_->Wait(std::move(keys));
      if (!waited.ok()) {
        result = waited.error();
      } else {
        HeardMaster();
        result = co_await watch_->Get(wire);
      }
      if (!result.ok() && !closed_) {
        Lost(result.error().what);
        result = Error{lost_what_, ""};
      }
    }
    done(std::move(result));
  }

  void Lost(const std::string& what) {
    if (lost_ || closed_) return;
    lost_ = true;
    lost_what_ = "the connection to its gculaunch at " + endpoint() + " broke (" + what + ")";
    wake_.cancel();
    if (on_lost_) {
      asio::post(io_, [on_lost = on_lost_, what = lost_what_] { on_lost(what); });
    }
  }

  // The master stayed silent past the bound: lost, with `what` as the whole reason.
  void LostSilent(const std::string& what) {
    if (lost_ || closed_) return;
    lost_ = true;
    lost_what_ = what;
    wake_.cancel();
    if (on_lost_) {
      asio::post(io_, [on_lost = on_lost_, what = lost_what_] { on_lost(what); });
    }
  }

  void FailQueue() {
    while (!queue_.empty()) {
      auto deliver = std::move(queue_.front().deliver);
      queue_.pop_front();
      asio::post(io_, [deliver, what = lost_what_] {
        deliver(Error{what.empty() ? "the link to the master node is closed" : what, ""});
      });
    }
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    connecting_ = false;
    progress_timer_.cancel();
    proxy_timer_.cancel();
    wake_.cancel();
    if (control_) control_->Close();
    if (watch_) watch_->Close();
  }

  asio::io_context& io_;
  RemoteLinkOptions options_;
  spdlog::logger& log_;
  asio::steady_timer wake_;
  asio::steady_timer progress_timer_;
  asio::steady_timer proxy_timer_;         ///< ThroughProxy waits on it
  std::optional<std::string> proxy_lost_;  ///< the proxy's WhenUp answer, once it came
  bool waiting_proxy_ = false;             ///< ThroughProxy is waiting
  bool via_proxy_ = false;                 ///< both connections go through this node's store proxy
  std::optional<rendezvous::Client> control_;
  std::optional<rendezvous::Client> watch_;
  std::deque<Op> queue_;
  std::function<Task<Result<std::string>>(rendezvous::Client&)> beat_;  ///< one heartbeat
  /// StartHeartbeat's `also_read`: its value at the latest beat, and when.
  std::optional<std::pair<std::string, Clock::time_point>> beat_read_;
  std::function<void(std::string)> on_lost_;
  job::SilenceRule rule_;    ///< how long the master may be silent (--node-timeout)
  job::OwnLag lag_;          ///< this process's own lateness, from Silence()'s ticks
  job::PeerSilence master_;  ///< counting while a control request waits
  std::string local_address_;
  std::string last_error_;
  std::string lost_what_;
  int attempts_ = 0;
  bool connecting_ = false;
  bool beating_ = false;
  bool beat_now_ = false;
  bool warned_ = false;  ///< the master's silence passed half the bound (WarnSilent)
  bool lost_ = false;
  bool closed_ = false;
};

RemoteAgentLink::RemoteAgentLink(asio::io_context& io, RemoteLinkOptions options,
                                 spdlog::logger& log)
    : core_(std::make_shared<RemoteLinkCore>(io, std::move(options), log)) {}

RemoteAgentLink::~RemoteAgentLink() { core_->Close(); }

void RemoteAgentLink::Connect(Done done) {
  asio::co_spawn(core_->io_, core_->DoConnect(std::move(done)), asio::detached);
}

std::string RemoteAgentLink::local_address() const { return core_->local_address_; }
std::string RemoteAgentLink::endpoint() const { return core_->endpoint(); }

void RemoteAgentLink::Reset(std::chrono::milliseconds connect_timeout) {
  RemoteLinkOptions options = core_->options_;
  options.connect_timeout = connect_timeout;
  // Node 0 coming back is awaited: try often (a handful of nodes, each a few times a second).
  options.max_backoff = std::min(options.max_backoff, std::chrono::milliseconds(250));
  options.initial_backoff = std::min(options.initial_backoff, std::chrono::milliseconds(50));
  auto fresh = std::make_shared<RemoteLinkCore>(core_->io_, std::move(options), core_->log_);
  core_->Close();
  core_ = std::move(fresh);
}

void RemoteAgentLink::StartHeartbeat(const std::string& key,
                                     std::function<void(std::string)> on_lost,
                                     const std::string& also_read) {
  core_->SetBeatKey(key, also_read);
  core_->on_lost_ = std::move(on_lost);
  core_->beating_ = true;
  core_->beat_now_ = true;  // the first beat at once: it names the control connection
  core_->wake_.cancel();
}

void RemoteAgentLink::StopHeartbeat() { core_->beating_ = false; }

bool RemoteAgentLink::ReadAtBeat(Value done) {
  const auto& read = core_->beat_read_;
  const auto fresh = 2 * core_->options_.heartbeat_interval;
  if (!core_->beating_ || !read || Clock::now() - read->second > fresh) return false;
  asio::post(core_->io_, [value = read->first, done = std::move(done)] { done(value); });
  return true;
}

void RemoteAgentLink::Set(const std::string& key, const std::string& value, Done done) {
  core_->Enqueue(
      {[key = job::KeyForSocket(key), value](rendezvous::Client& c) -> Task<Result<std::string>> {
         Status s = co_await c.Set(key, value);
         if (!s.ok()) co_return s.error();
         co_return std::string();
       },
       [done = std::move(done)](const Result<std::string>& r) {
         done(r.ok() ? OkStatus() : Status(r.error()));
       }});
}

void RemoteAgentLink::CompareSet(const std::string& key, const std::string& expected,
                                 const std::string& desired, Value done) {
  core_->Enqueue({[key = job::KeyForSocket(key), expected,
                   desired](rendezvous::Client& c) -> Task<Result<std::string>> {
                    co_return co_await c.CompareSet(key, expected, desired);
                  },
                  std::move(done)});
}

void RemoteAgentLink::Get(const std::string& key, Value done) {
  core_->Enqueue(
      {[key = job::KeyForSocket(key)](rendezvous::Client& c) -> Task<Result<std::string>> {
         co_return co_await c.Get(key);
       },
       std::move(done)});
}

void RemoteAgentLink::Add(const std::string& key, std::int64_t delta, Value done) {
  core_->Enqueue(
      {[key = job::KeyForSocket(key), delta](rendezvous::Client& c) -> Task<Result<std::string>> {
         auto n = co_await c.Add(key, delta);
         if (!n.ok()) co_return n.error();
         co_return std::to_string(*n);
       },
       std::move(done)});
}

void RemoteAgentLink::WaitGet(const std::string& key, Value done) {
  asio::co_spawn(core_->io_, core_->DoWaitGet(key, std::move(done)), asio::detached);
}

void RemoteAgentLink::Close() { core_->Close(); }

}  // namespace gculaunch
