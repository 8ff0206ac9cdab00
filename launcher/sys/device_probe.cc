#include "launcher/sys/device_probe.h"

#include <sched.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "base/text.h"
#include "launcher/frontend/cpu_list.h"

namespace gculaunch {
namespace {

bool IsDigits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

bool NumericLess(const std::string& a, const std::string& b) {
  const bool a_num = IsDigits(a);
  const bool b_num = IsDigits(b);
  if (a_num && b_num && a.size() != b.size()) return a.size() < b.size();
  return a < b;
}

}  // namespace

std::vector<DeviceFile> FileSystemDeviceProbe::FindDevices(const DeviceProfile& profile) const {
  std::vector<DeviceFile> found;
  if (!profile.has_devices()) return found;
  const std::regex pattern(profile.device_pattern);
  std::error_code ec;
  std::filesystem::directory_iterator it(root_ + profile.device_dir, ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::smatch match;
    if (!std::regex_match(name, match, pattern)) continue;
    if (!profile.vendor_path.empty()) {
      std::string vendor_file = profile.vendor_path;
      vendor_file.replace(vendor_file.find("{name}"), 6, name);
      std::ifstream in(root_ + vendor_file);
      std::stringstream content;
      content << in.rdbuf();
      if (!in || Lower(Trim(content.str())) != Lower(profile.vendor_id)) continue;
    }
    found.push_back({profile.device_dir + "/" + name, match[1].str()});
  }
  std::sort(found.begin(), found.end(),
            [](const DeviceFile& a, const DeviceFile& b) { return NumericLess(a.id, b.id); });
  return found;
}

bool FileSystemDeviceProbe::Exists(const std::string& path) const {
  std::error_code ec;
  return std::filesystem::exists(root_ + path, ec);
}

std::optional<std::string> FileSystemDeviceProbe::ReadFile(const std::string& path) const {
  std::ifstream in(root_ + path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream content;
  content << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return content.str();
}

std::vector<std::string> FileSystemDeviceProbe::ListDir(const std::string& path) const {
  std::vector<std::string> names;
  std::error_code ec;
  std::filesystem::directory_iterator it(root_ + path, ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<std::pair<unsigned, unsigned>> FileSystemDeviceProbe::CharDeviceNumber(
    const std::string& path) const {
  struct stat st {};
  if (::stat((root_ + path).c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) return std::nullopt;
  return std::make_pair(major(st.st_rdev), minor(st.st_rdev));
}

std::vector<int> FileSystemDeviceProbe::AllowedCpus() const {
  if (root_ == "/" || root_.empty()) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
      std::vector<int> cpus;
      for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
      }
      if (!cpus.empty()) return cpus;
    }
    return DeviceProbe::AllowedCpus();
  }
  if (auto text = ReadFile("/sys/devices/system/cpu/online")) {
    if (auto cpus = ParseCpuList(*text); cpus && !cpus->empty()) return *cpus;
  }
  return DeviceProbe::AllowedCpus();
}

int FileSystemDeviceProbe::CpuCount() const {
  // The CPUs this process may run on (a container's cpuset), as torchrun's
  // os.cpu_count() would report on a plain host.
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int count = CPU_COUNT(&set);
    if (count > 0) return count;
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

}  // namespace gculaunch
