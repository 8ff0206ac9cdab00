// Errors as values.
//
// Every fallible operation in gculaunch returns a Result<T> (or a Status when
// there is no value).  An Error carries two sentences: `what` names the
// problem and the input that caused it, `hint` says how to fix it.  Both are
// single lines; Format() joins them into the one-line message that users see:
//
//   gculaunch: --nnodes '1:4': elastic ranges are not supported (fix: give a fixed count such as
//   --nnodes 4)
//
// Exceptions from third-party libraries (CLI11, yaml-cpp, Boost.Process) are
// caught in the adapter that calls the library and converted to an Error
// there; nothing above the adapters throws.
//
// Thread safety: plain values; no shared state.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace gculaunch {

/// A problem and its fix, each one line.
struct Error {
  std::string what;  ///< what went wrong, naming the flag, variable, file or peer
  std::string hint;  ///< how to fix it; may be empty when there is nothing to suggest
  /// The exit code gculaunch ends with when this error stops it (e.g. 126, 127); 0: the
  /// caller's own (2 for a bad command line or spec).
  int exit_code = 0;

  /// "gculaunch: <what> (fix: <hint>)", or "gculaunch: <what>" without a hint.
  std::string Format() const {
    std::string out = "gculaunch: " + what;
    if (!hint.empty()) out += " (fix: " + hint + ")";
    return out;
  }
};

/// Either a T or an Error.  Small and explicit: check ok() before value().
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  /// REQUIRES: ok().
  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  /// REQUIRES: !ok().
  const Error& error() const {
    assert(!ok());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

/// Result without a value.
struct Ok {};
using Status = Result<Ok>;
inline Status OkStatus() { return Ok{}; }

}  // namespace gculaunch
