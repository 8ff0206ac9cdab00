#include "launcher/frontend/profile_catalog.h"

#include <algorithm>
#include <sstream>

namespace gculaunch {

std::vector<std::string> ProfileSearchPath(const EnvMap& env) {
  const std::string path = env.GetOr("GCULAUNCH_PROFILE_PATH", kDefaultProfilePath);
  std::vector<std::string> dirs;
  std::stringstream in(path);
  std::string dir;
  while (std::getline(in, dir, ':')) {
    if (!dir.empty()) dirs.push_back(dir);
  }
  return dirs;
}

Result<ProfileCatalog> LoadProfileCatalog(const std::vector<std::string>& dirs,
                                          const FileAccess& files) {
  ProfileCatalog catalog;
  catalog.profiles = BuiltinDeviceProfiles();
  // Lowest priority first, so that earlier directories overwrite later ones.
  for (auto dir = dirs.rbegin(); dir != dirs.rend(); ++dir) {
    for (const std::string& name : files.ListDir(*dir)) {
      if (!name.ends_with(".yaml") && !name.ends_with(".yml")) continue;
      const std::string path = *dir + "/" + name;
      auto text = files.ReadTextFile(path);
      if (!text.ok()) {
        return Error{text.error().what, "fix its permissions or remove it from " + *dir};
      }
      // The package installs the shipped files too: an unchanged copy is the
      // built-in profile, not an override worth a note.
      const bool shipped_copy =
          std::any_of(BuiltinProfileTexts().begin(), BuiltinProfileTexts().end(),
                      [&](const auto& builtin) { return builtin.second == *text; });
      if (shipped_copy) continue;
      auto profile = ParseDeviceProfile(*text, path);
      if (!profile.ok()) return profile.error();
      auto same = std::find_if(catalog.profiles.begin(), catalog.profiles.end(),
                               [&](const DeviceProfile& p) { return p.name == profile->name; });
      if (same != catalog.profiles.end()) {
        *same = std::move(*profile);
      } else {
        catalog.profiles.push_back(std::move(*profile));
      }
    }
  }
  std::stable_sort(catalog.profiles.begin(), catalog.profiles.end(),
                   [](const DeviceProfile& a, const DeviceProfile& b) {
                     return a.auto_order != b.auto_order ? a.auto_order < b.auto_order
                                                         : a.name < b.name;
                   });
  return catalog;
}

std::string ProfileNames(const ProfileCatalog& catalog) {
  std::string out;
  for (const DeviceProfile& p : catalog.profiles) {
    if (!out.empty()) out += ", ";
    out += p.aliases.empty() ? p.name : p.aliases.front();
  }
  return out;
}

Result<DeviceProfile> FindProfile(const ProfileCatalog& catalog, const std::string& name) {
  for (const DeviceProfile& p : catalog.profiles) {
    if (p.name == name || std::find(p.aliases.begin(), p.aliases.end(), name) != p.aliases.end()) {
      return p;
    }
  }
  return Error{"no device profile named '" + name + "'",
               "use one of " + ProfileNames(catalog) + ", auto, or a YAML file path"};
}

}  // namespace gculaunch
