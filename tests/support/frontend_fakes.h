// Fakes for the front end's injected OS access (DeviceProbe, FileAccess) and a
// temporary directory that removes itself.  Header-only; tests only.
//
// Thread safety: single-threaded test use.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "launcher/device_profile.h"
#include "launcher/launch_spec.h"

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
  mutable std::string last_path_var;

  std::optional<std::string> FindExecutable(const std::string& name,
                                            const std::string& path_var) const override {
    last_path_var = path_var;
    auto it = executables.find(name);
    if (it == executables.end()) return std::nullopt;
    return it->second;
  }
  Result<std::string> ReadTextFile(const std::string& path) const override {
    auto it = files.find(path);
    if (it == files.end()) {
      return Error{"cannot read '" + path + "': No such file or directory", ""};
    }
    return it->second;
  }
};

/// A fresh directory under the system's temporary directory, removed with
/// everything in it when the object goes away.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "gculaunch_test_XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

  /// Creates the file `relative` (and its directories) with `content`.
  std::string Write(const std::string& relative, const std::string& content = "") const {
    const std::filesystem::path file = std::filesystem::path(path_) / relative;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << content;
    return file.string();
  }

 private:
  std::string path_;
};

}  // namespace gculaunch::testing
