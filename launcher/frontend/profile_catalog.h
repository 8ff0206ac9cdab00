// The device profiles `--device NAME` and `--device auto` choose from.
//
// Built into the binary are configs/devices/*.yaml.  Directories of YAML
// files overlay them, the first directory on the search path winning:
//
//   /etc/gculaunch/devices          the site's own profiles and overrides
//   /usr/local/share/gculaunch/devices
//   /usr/share/gculaunch/devices    what the .deb installs (the shipped files)
//
// A file whose profile `name` equals a built-in (or lower-priority) one
// replaces it; any other name adds a profile (aliases included).  A file
// identical to a shipped one (the package's copies) changes nothing.  Every
// *.yaml / *.yml file of these directories is parsed strictly; a broken one
// is an error naming it, whichever profile is wanted.  A directory that does
// not exist is skipped.  GCULAUNCH_PROFILE_PATH (':'-separated directories)
// replaces the search path; it is how tests point at directories of their own.
//
// Thread safety: pure functions of their inputs (files are read through FileAccess).
#pragma once

#include <string>
#include <vector>

#include "base/env_map.h"
#include "base/error.h"
#include "launcher/frontend/device_profile.h"
#include "launcher/frontend/file_access.h"

namespace gculaunch {

/// The default search path, highest priority first.
inline constexpr const char* kDefaultProfilePath =
    "/etc/gculaunch/devices:/usr/local/share/gculaunch/devices:/usr/share/gculaunch/devices";

struct ProfileCatalog {
  /// Sorted like BuiltinDeviceProfiles(): (auto_order, name).  `source` is
  /// "built-in" or the file a profile came from.
  std::vector<DeviceProfile> profiles;
};

/// GCULAUNCH_PROFILE_PATH from `env` split at ':', else kDefaultProfilePath.
std::vector<std::string> ProfileSearchPath(const EnvMap& env);

/// The built-in profiles overlaid with the files in `dirs` (first dir wins).
Result<ProfileCatalog> LoadProfileCatalog(const std::vector<std::string>& dirs,
                                          const FileAccess& files);

/// A profile by name or alias.  The error lists the names there are.
Result<DeviceProfile> FindProfile(const ProfileCatalog& catalog, const std::string& name);

/// "gcu, cuda, ..., cpu": the first alias (or the name) of every profile.
std::string ProfileNames(const ProfileCatalog& catalog);

}  // namespace gculaunch
