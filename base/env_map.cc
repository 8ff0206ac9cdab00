#include "base/env_map.h"

namespace gculaunch {

EnvMap EnvMap::FromStrings(const std::vector<std::string>& entries) {
  EnvMap env;
  for (const std::string& entry : entries) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    // The first definition wins, as getenv() would return it.
    env.vars_.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

EnvMap EnvMap::FromEnviron(const char* const* environ_array) {
  std::vector<std::string> entries;
  for (const char* const* p = environ_array; p != nullptr && *p != nullptr; ++p) {
    entries.emplace_back(*p);
  }
  return FromStrings(entries);
}

std::vector<std::string> EnvMap::ToStrings() const {
  std::vector<std::string> out;
  out.reserve(vars_.size());
  for (const auto& [key, value] : vars_) out.push_back(key + "=" + value);
  return out;
}

std::optional<std::string> EnvMap::Get(std::string_view key) const {
  auto it = vars_.find(key);
  if (it == vars_.end()) return std::nullopt;
  return it->second;
}

std::string EnvMap::GetOr(std::string_view key, std::string_view fallback) const {
  auto it = vars_.find(key);
  return it == vars_.end() ? std::string(fallback) : it->second;
}

bool EnvMap::Has(std::string_view key) const { return vars_.find(key) != vars_.end(); }

void EnvMap::Set(std::string key, std::string value) {
  vars_.insert_or_assign(std::move(key), std::move(value));
}

void EnvMap::Erase(std::string_view key) {
  auto it = vars_.find(key);
  if (it != vars_.end()) vars_.erase(it);
}

std::map<std::string, std::string> EnvMap::ChangedIn(const EnvMap& after) const {
  std::map<std::string, std::string> changed;
  for (const auto& [key, value] : after.vars_) {
    auto it = vars_.find(key);
    if (it == vars_.end() || it->second != value) changed.emplace(key, value);
  }
  return changed;
}

}  // namespace gculaunch
