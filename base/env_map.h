// EnvMap: an environment as a value.
//
// The process environment reaches gculaunch's core only as an EnvMap built by
// main() (the one place that reads `environ`).  Everything else takes the map
// as an argument, so tests construct environments as literals.  A child's
// environment is also an EnvMap: Boost.Process v2 *replaces* a child's
// environment, so the map handed to the spawner is the complete one.
//
// Keys are kept sorted, which makes dry-run output and diffs deterministic.
//
// Thread safety: a plain value.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gculaunch {

class EnvMap {
 public:
  EnvMap() = default;
  EnvMap(std::initializer_list<std::pair<const std::string, std::string>> init) : vars_(init) {}

  /// Parses "KEY=VALUE" strings (as in `environ`); entries without '=' are ignored.
  static EnvMap FromStrings(const std::vector<std::string>& entries);
  /// Parses a NULL-terminated `environ`-style array.  Only main() should pass `environ`.
  static EnvMap FromEnviron(const char* const* environ_array);

  /// "KEY=VALUE" strings in key order, for process spawning.
  std::vector<std::string> ToStrings() const;

  std::optional<std::string> Get(std::string_view key) const;
  /// The value, or `fallback` when the key is absent.
  std::string GetOr(std::string_view key, std::string_view fallback) const;
  bool Has(std::string_view key) const;
  void Set(std::string key, std::string value);
  void Erase(std::string_view key);

  /// Variables that are new or changed in `after` compared with this map, in key order.
  /// (Variables removed in `after` are not reported.)
  std::map<std::string, std::string> ChangedIn(const EnvMap& after) const;

  const std::map<std::string, std::string, std::less<>>& vars() const { return vars_; }
  size_t size() const { return vars_.size(); }
  bool operator==(const EnvMap& other) const = default;

 private:
  std::map<std::string, std::string, std::less<>> vars_;
};

}  // namespace gculaunch
