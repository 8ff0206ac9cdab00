// LifetimeGuard: lets a callback that may outlive its owner find out that the owner is gone.
//
// An object that hands out callbacks capturing `this` to something that may call them
// later (an Asio timer, signal_set or posted handler, the store's AsyncWait, an agent
// link) keeps a LifetimeGuard and passes each such callback through Wrap().  The wrapped
// callback runs the original while the guard lives and does nothing once it has expired:
// when the owner, and with it the guard, is destroyed, or when the owner called Expire().
// A callback that must know part-way through whether the owner still exists (it called
// code that may have destroyed it, and has more to do) asks a Token.
//
//   class Poller {
//    public:
//     void Arm() {
//       timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
//         if (!ec) Poll();
//       }));
//     }
//    private:
//     boost::asio::steady_timer timer_;
//     LifetimeGuard lifetime_;  // the last member: it expires before the others are destroyed
//   };
//
// Declare the guard as the owner's last member, so that it expires before any other member
// is destroyed.  An owner whose destructor body may itself set off wrapped callbacks (it
// closes streams whose close handlers are wrapped) calls Expire() first.
//
// Ownership: the guard owns a small shared flag; wrapped callbacks and tokens hold weak
// references to it, so they may outlive the guard and keep nothing alive.
// Thread safety: the owner, its guard, and every call of a wrapped callback or a token
// belong to one thread, the io_context's.  The guard tells a callback that its owner is
// gone; it cannot keep another thread from destroying the owner while a callback runs.
// Wrapped callbacks and tokens themselves may be copied, moved and destroyed on any thread
// (a writer thread may hold one and post it back to the io_context).
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace gculaunch {

class LifetimeGuard {
 public:
  /// Whether the guard it came from has expired, asked after the guard may be gone.
  class Token {
   public:
    /// An expired token.
    Token() = default;
    bool expired() const { return flag_.expired(); }

   private:
    friend class LifetimeGuard;
    explicit Token(std::weak_ptr<const int> flag) : flag_(std::move(flag)) {}
    std::weak_ptr<const int> flag_;
  };

  LifetimeGuard() = default;
  LifetimeGuard(const LifetimeGuard&) = delete;
  LifetimeGuard& operator=(const LifetimeGuard&) = delete;

  /// Calls a callable while the guard it came from has not expired; does nothing afterwards.
  /// Callable as const when `F` is.  Copyable when `F` is.
  template <typename F>
  class Wrapped {
   public:
    template <typename... Args>
    void operator()(Args&&... args) {
      static_assert(std::is_void_v<std::invoke_result_t<F&, Args...>>,
                    "a callback wrapped by LifetimeGuard must return void");
      if (!flag_.expired()) f_(std::forward<Args>(args)...);
    }
    template <typename... Args>
    requires std::is_invocable_v<const F&, Args...>
    void operator()(Args&&... args) const {
      static_assert(std::is_void_v<std::invoke_result_t<const F&, Args...>>,
                    "a callback wrapped by LifetimeGuard must return void");
      if (!flag_.expired()) f_(std::forward<Args>(args)...);
    }

   private:
    friend class LifetimeGuard;
    Wrapped(std::weak_ptr<const int> flag, F f) : flag_(std::move(flag)), f_(std::move(f)) {}
    std::weak_ptr<const int> flag_;
    F f_;
  };

  /// `f` wrapped: the result calls `f` with its arguments while this guard has not expired,
  /// and does nothing afterwards.  `f` must return void: a call that may not happen has no
  /// result to give.
  template <typename F>
  Wrapped<F> Wrap(F f) const {
    return Wrapped<F>(flag_, std::move(f));
  }

  /// A token that reports this guard's expiry.
  Token token() const { return Token(flag_); }

  /// Expires the guard now: every wrapped callback does nothing from here on, and every
  /// token reports expired.  Idempotent; the destructor does the same.
  void Expire() { flag_.reset(); }

  bool expired() const { return flag_ == nullptr; }

 private:
  std::shared_ptr<const int> flag_ = std::make_shared<const int>(0);
};

}  // namespace gculaunch
