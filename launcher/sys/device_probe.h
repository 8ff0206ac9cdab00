// FileSystemDeviceProbe: the real DeviceProbe (device_profile.h).  It reads device files,
// sysfs and this process's CPU affinity below a root prefix: "/" normally, a fake tree in
// tests and with --sysroot.
//
// Thread safety: const methods; no state besides the root.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/frontend/device_profile.h"

namespace gculaunch {

/// The real probe: paths are looked up below `root` ("/" by default).
class FileSystemDeviceProbe : public DeviceProbe {
 public:
  explicit FileSystemDeviceProbe(std::string root = "/") : root_(std::move(root)) {}
  std::vector<DeviceFile> FindDevices(const DeviceProfile& profile) const override;
  bool Exists(const std::string& path) const override;
  int CpuCount() const override;
  std::optional<std::string> ReadFile(const std::string& path) const override;
  std::vector<std::string> ListDir(const std::string& path) const override;
  std::optional<std::pair<unsigned, unsigned>> CharDeviceNumber(
      const std::string& path) const override;
  /// Root "/": this process's affinity mask (a container's cpuset).  Any
  /// other root (a fake tree): <root>/sys/devices/system/cpu/online, else the default.
  std::vector<int> AllowedCpus() const override;

 private:
  std::string root_;
};

}  // namespace gculaunch
