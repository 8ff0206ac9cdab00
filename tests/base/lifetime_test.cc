#include "base/lifetime.h"

#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gculaunch {
namespace {

// An owner in the shape the guard is made for: it hands out callbacks capturing `this`.
class Counter {
 public:
  std::function<void(int)> AddLater() {
    return lifetime_.Wrap([this](int n) { total_ += n; });
  }
  int total() const { return total_; }
  LifetimeGuard& lifetime() { return lifetime_; }

 private:
  int total_ = 0;
  LifetimeGuard lifetime_;
};

TEST_CASE("lifetime: a wrapped callback runs while its owner lives", "[lifetime]") {
  Counter counter;
  auto add = counter.AddLater();
  add(2);
  add(3);
  CHECK(counter.total() == 5);
  CHECK_FALSE(counter.lifetime().expired());
  CHECK_FALSE(counter.lifetime().token().expired());
}

TEST_CASE("lifetime: a wrapped callback does nothing once its owner is destroyed", "[lifetime]") {
  int calls = 0;
  std::function<void()> later;
  LifetimeGuard::Token token;
  {
    LifetimeGuard guard;
    later = guard.Wrap([&calls] { ++calls; });
    token = guard.token();
    later();
    CHECK_FALSE(token.expired());
  }
  later();
  later();
  CHECK(calls == 1);
  CHECK(token.expired());
}

TEST_CASE("lifetime: Expire() ends the guard early, for every copy and later wrap", "[lifetime]") {
  LifetimeGuard guard;
  int calls = 0;
  auto first = guard.Wrap([&calls] { ++calls; });
  auto copy = first;
  const LifetimeGuard::Token token = guard.token();
  guard.Expire();
  first();
  copy();
  guard.Wrap([&calls] { ++calls; })();
  CHECK(calls == 0);
  CHECK(guard.expired());
  CHECK(token.expired());
  CHECK(guard.token().expired());
  guard.Expire();  // idempotent
  CHECK(guard.expired());
}

TEST_CASE("lifetime: arguments are forwarded, move-only ones included", "[lifetime]") {
  LifetimeGuard guard;
  std::vector<std::string> seen;
  auto take = guard.Wrap([&seen](std::unique_ptr<std::string> text, const std::string& suffix) {
    seen.push_back(*text + suffix);
  });
  take(std::make_unique<std::string>("a"), std::string("!"));
  std::string target = "x";
  auto append = guard.Wrap([](std::string& s) { s += "y"; });  // an lvalue stays one
  append(target);
  CHECK(seen == std::vector<std::string>{"a!"});
  CHECK(target == "xy");
}

TEST_CASE("lifetime: a wrapped callable keeps its own state between calls", "[lifetime]") {
  LifetimeGuard guard;
  std::vector<int> seen;
  auto next = guard.Wrap([&seen, n = 0]() mutable { seen.push_back(++n); });
  next();
  next();
  next();
  CHECK(seen == std::vector<int>{1, 2, 3});
}

TEST_CASE("lifetime: a const wrapped callback is callable when its callable is", "[lifetime]") {
  // Asio's post() takes a const handler by reference, for one.
  LifetimeGuard guard;
  int calls = 0;
  const auto wrapped = guard.Wrap([&calls] { ++calls; });
  wrapped();
  guard.Expire();
  wrapped();
  CHECK(calls == 1);
}

TEST_CASE("lifetime: a token tells a callback that its own call destroyed the owner",
          "[lifetime]") {
  // The owner is destroyed by the callback it runs; the code after that call must not touch
  // it, and the token is what tells.
  auto owner = std::make_unique<Counter>();
  std::vector<std::string> steps;
  std::function<void()> destroy_owner = [&owner] { owner.reset(); };
  auto handler = owner->lifetime().Wrap([&, token = owner->lifetime().token()] {
    steps.push_back("before");
    destroy_owner();
    steps.push_back(token.expired() ? "owner gone" : "owner alive");
  });
  handler();
  handler();  // the guard is gone: nothing happens
  CHECK(owner == nullptr);
  CHECK(steps == std::vector<std::string>{"before", "owner gone"});
}

TEST_CASE("lifetime: a default token is expired", "[lifetime]") {
  CHECK(LifetimeGuard::Token().expired());
}

}  // namespace
}  // namespace gculaunch
