// Fakes for the front end's injected OS access (DeviceProbe, FileAccess).  Header-only;
// tests only.  (TempDir, with Write for fake trees, is in tests/support/test_util.h.)
//
// Thread safety: single-threaded test use.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "launcher/frontend/device_profile.h"
#include "launcher/frontend/launch_spec.h"
#include "tests/support/test_util.h"

namespace gculaunch::testing {

/// Answers from tables: device files per profile name, existing paths, CPUs.
class FakeDeviceProbe : public DeviceProbe {
 public:
  std::map<std::string, std::vector<DeviceFile>> devices;  ///< profile name -> files
  std::set<std::string> existing;                          ///< paths Exists() confirms
  int cpus = 4;

  /// Adds /dev/<prefix>N for each id to the profile `name`.
  void AddCards(const std::string& name, const std::string& dev_prefix, std::vector<int> ids) {
    for (int id : ids) {
      devices[name].push_back({"/dev/" + dev_prefix + std::to_string(id), std::to_string(id)});
    }
  }
  std::vector<DeviceFile> FindDevices(const DeviceProfile& profile) const override {
    auto it = devices.find(profile.name);
    return it == devices.end() ? std::vector<DeviceFile>{} : it->second;
  }
  bool Exists(const std::string& path) const override { return existing.count(path) != 0; }
  int CpuCount() const override { return cpus; }
};

/// Executables and text files from tables; remembers the PATH it was given.
class FakeFileAccess : public FileAccess {
 public:
  /// name as asked (e.g. "python3" or "/opt/py/bin/python") -> path found
  std::map<std::string, std::string> executables;
  std::map<std::string, std::string> files;  ///< path -> content
  std::set<std::string> other_files;         ///< exist, but are neither of the above
  mutable std::string last_path_var;

  std::optional<std::string> FindExecutable(const std::string& name,
                                            const std::string& path_var) const override {
    last_path_var = path_var;
    auto it = executables.find(name);
    if (it == executables.end()) return std::nullopt;
    return it->second;
  }
  bool FileExists(const std::string& path) const override {
    return other_files.count(path) != 0 || files.count(path) != 0;
  }
  Result<std::string> ReadTextFile(const std::string& path) const override {
    auto it = files.find(path);
    if (it == files.end()) {
      return Error{"cannot read '" + path + "': No such file or directory", ""};
    }
    return it->second;
  }
};

}  // namespace gculaunch::testing
