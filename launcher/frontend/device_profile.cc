#include "launcher/frontend/device_profile.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "base/one_line.h"
#include "base/text.h"
#include "launcher/frontend/cpu_list.h"

// This file is the yaml-cpp adapter: every yaml-cpp exception is caught in
// ParseDeviceProfile and turned into an Error naming the file and line.

namespace gculaunch {
namespace {

constexpr const char* kTopKeys[] = {"name",
                                    "aliases",
                                    "description",
                                    "visible_env",
                                    "container_visible_env",
                                    "devices",
                                    "driver_path",
                                    "backend",
                                    "collective_library",
                                    "python_module",
                                    "socket_ifname_env",
                                    "auto_order",
                                    "env",
                                    "health"};
constexpr const char* kDeviceKeys[] = {"dir", "pattern", "vendor_path", "vendor_id"};
constexpr const char* kHealthKeys[] = {"tool", "args",    "index", "fields",
                                       "lost", "timeout", "memory"};
constexpr const char* kHealthMemoryKeys[] = {"field", "below_mib"};
constexpr const char* kHealthFieldKeys[] = {"name", "unhealthy", "says"};

template <size_t N>
std::string JoinKeys(const char* const (&keys)[N]) {
  std::string out;
  for (const char* key : keys) {
    if (!out.empty()) out += ", ";
    out += key;
  }
  return out;
}

template <size_t N>
bool IsKnown(const std::string& key, const char* const (&keys)[N]) {
  return std::any_of(std::begin(keys), std::end(keys), [&](const char* k) { return key == k; });
}

bool IsProfileName(const std::string& name) {
  static const std::regex kName("[a-z0-9][a-z0-9._-]*");
  return std::regex_match(name, kName);
}

// Reads one mapping node's fields with file:line error messages.
class ProfileReader {
 public:
  explicit ProfileReader(const std::string& origin) : origin_(origin) {}

  Error At(const YAML::Node& node, const std::string& what, const std::string& hint) const {
    return Error{origin_ + ":" + std::to_string(node.Mark().line + 1) + ": " + what, hint};
  }

  Result<std::string> String(const YAML::Node& node, const std::string& key) const {
    if (!node.IsScalar()) {
      return At(node, "'" + key + "' must be a string", "write it as " + key + ": TEXT");
    }
    return node.Scalar();
  }

  Result<std::vector<std::string>> StringList(const YAML::Node& node,
                                              const std::string& key) const {
    if (!node.IsSequence()) {
      return At(node, "'" + key + "' must be a list of strings", "write it as " + key + ": [A, B]");
    }
    std::vector<std::string> out;
    for (const YAML::Node& item : node) {
      if (!item.IsScalar()) {
        return At(item, "'" + key + "' must be a list of strings",
                  "write it as " + key + ": [A, B]");
      }
      out.push_back(item.Scalar());
    }
    return out;
  }

 private:
  const std::string& origin_;
};

Status CheckEnvName(const ProfileReader& reader, const YAML::Node& node, const std::string& key,
                    const std::string& name) {
  if (IsEnvName(name)) return OkStatus();
  return reader.At(node, "'" + key + "': '" + name + "' is not a valid environment variable name",
                   "use letters, digits and '_', not starting with a digit");
}

Status ReadDevices(const ProfileReader& reader, const YAML::Node& devices, DeviceProfile& p) {
  if (!devices.IsMap()) {
    return reader.At(devices, "'devices' must be a mapping",
                     "give dir: and pattern: under devices:");
  }
  for (const auto& entry : devices) {
    const std::string key = entry.first.Scalar();
    if (!IsKnown(key, kDeviceKeys)) {
      return reader.At(entry.first, "unknown key 'devices." + key + "'",
                       "known keys under devices: " + JoinKeys(kDeviceKeys));
    }
    auto value = reader.String(entry.second, "devices." + key);
    if (!value.ok()) return value.error();
    if (key == "dir") p.device_dir = *value;
    if (key == "pattern") p.device_pattern = *value;
    if (key == "vendor_path") p.vendor_path = *value;
    if (key == "vendor_id") p.vendor_id = *value;
  }
  if (p.device_pattern.empty()) {
    return reader.At(devices, "missing required key 'devices.pattern'",
                     "add pattern: with a regex such as 'gcu([0-9]+)'");
  }
  if (p.device_dir.empty() || p.device_dir[0] != '/') {
    return reader.At(devices, "'devices.dir' must be an absolute path", "write it as dir: /dev");
  }
  try {
    std::regex re(p.device_pattern);
    if (re.mark_count() < 1) {
      return reader.At(devices, "'devices.pattern' needs a capture group for the card id",
                       "write it as pattern: 'gcu([0-9]+)'");
    }
  } catch (const std::regex_error& e) {
    return reader.At(devices, "'devices.pattern' is not a valid regex: " + std::string(e.what()),
                     "write it as pattern: 'gcu([0-9]+)'");
  }
  if (p.vendor_path.empty() != p.vendor_id.empty()) {
    return reader.At(devices, "'devices.vendor_path' and 'devices.vendor_id' go together",
                     "give both or neither");
  }
  if (!p.vendor_path.empty() && p.vendor_path.find("{name}") == std::string::npos) {
    return reader.At(devices, "'devices.vendor_path' must contain {name}",
                     "write it as vendor_path: /sys/class/drm/{name}/device/vendor");
  }
  return OkStatus();
}

Status ReadHealthField(const ProfileReader& reader, const YAML::Node& node, HealthToolSpec& h) {
  if (!node.IsMap()) {
    return reader.At(node, "'health.fields' must be a list of mappings",
                     "write each as {name: FIELD, unhealthy: 'above 0', says: TEXT}");
  }
  HealthField field;
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    if (!IsKnown(key, kHealthFieldKeys)) {
      return reader.At(entry.first, "unknown key 'health.fields." + key + "'",
                       "known keys: " + JoinKeys(kHealthFieldKeys));
    }
    auto value = reader.String(entry.second, "health.fields." + key);
    if (!value.ok()) return value.error();
    (key == "name" ? field.name : key == "unhealthy" ? field.unhealthy : field.says) = *value;
  }
  static const std::regex kAbove("above [0-9]{1,12}");
  if (field.name.empty() || field.unhealthy.empty()) {
    return reader.At(node, "a health field needs 'name' and 'unhealthy'",
                     "write it as {name: FIELD, unhealthy: 'above 0', says: TEXT}");
  }
  if (field.unhealthy.rfind("above", 0) == 0 && !std::regex_match(field.unhealthy, kAbove)) {
    return reader.At(node, "'unhealthy: " + field.unhealthy + "' is not 'above N'",
                     "write unhealthy: 'above 0' (a whole number), or the exact bad value");
  }
  if (field.says.empty()) field.says = field.name + " " + field.unhealthy;
  h.fields.push_back(std::move(field));
  return OkStatus();
}

// health.memory: {field: memory.used, below_mib: 1024} (docs/device-profiles.md, "Device memory
// before a restart").
Status ReadHealthMemory(const ProfileReader& reader, const YAML::Node& node, HealthToolSpec& h) {
  static const char* const kFix = "write it as memory: {field: memory.used, below_mib: 1024}";
  if (!node.IsMap()) return reader.At(node, "'health.memory' must be a mapping", kFix);
  HealthToolSpec::Memory m;
  std::string below;
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    if (!IsKnown(key, kHealthMemoryKeys)) {
      return reader.At(entry.first, "unknown key 'health.memory." + key + "'",
                       "known keys: " + JoinKeys(kHealthMemoryKeys));
    }
    auto value = reader.String(entry.second, "health.memory." + key);
    if (!value.ok()) return value.error();
    (key == "field" ? m.field : below) = *value;
  }
  const auto mib = ParseInteger(below);
  if (m.field.empty() || !mib || *mib <= 0 || *mib > (int64_t{1} << 40)) {
    return reader.At(node, "'health.memory' needs 'field' and 'below_mib' (a whole number > 0)",
                     kFix);
  }
  m.below_mib = *mib;
  h.memory = std::move(m);
  return OkStatus();
}

Status ReadHealthEntry(const ProfileReader& reader, const std::string& key, const YAML::Node& value,
                       HealthToolSpec& h) {
  if (key == "memory") return ReadHealthMemory(reader, value, h);
  if (key == "fields") {
    if (!value.IsSequence()) {
      return reader.At(value, "'health.fields' must be a list", "write it as fields: [{...}]");
    }
    for (const YAML::Node& item : value) {
      if (Status ok = ReadHealthField(reader, item, h); !ok.ok()) return ok;
    }
    return OkStatus();
  }
  if (key == "args" || key == "lost") {
    auto list = reader.StringList(value, "health." + key);
    if (!list.ok()) return list.error();
    (key == "args" ? h.args : h.lost) = std::move(*list);
    return OkStatus();
  }
  auto text = reader.String(value, "health." + key);
  if (!text.ok()) return text.error();
  if (key == "tool") {
    h.tool = *text;
  } else if (key == "index") {
    h.index_field = *text;
  } else {
    static const std::regex kSeconds("[0-9]{1,4}(\\.[0-9]+)?");
    if (!std::regex_match(*text, kSeconds) || std::stod(*text) <= 0) {
      return reader.At(value, "'health.timeout' must be seconds > 0", "write it as timeout: 10");
    }
    h.timeout_s = std::stod(*text);
  }
  return OkStatus();
}

// health: the vendor tool's query (configs/devices/README.md, "health").
Status ReadHealth(const ProfileReader& reader, const YAML::Node& node, DeviceProfile& p) {
  if (!node.IsMap()) {
    return reader.At(node, "'health' must be a mapping", "give tool:, args: and fields: under it");
  }
  HealthToolSpec h;
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    if (!IsKnown(key, kHealthKeys)) {
      return reader.At(entry.first, "unknown key 'health." + key + "'",
                       "known keys under health: " + JoinKeys(kHealthKeys));
    }
    if (Status ok = ReadHealthEntry(reader, key, entry.second, h); !ok.ok()) return ok;
  }
  if (h.tool.empty() || h.fields.empty()) {
    return reader.At(node, "'health' needs 'tool' and 'fields'",
                     "name the tool (tool: nvidia-smi) and at least one field");
  }
  if (h.tool.find('/') != std::string::npos) {
    return reader.At(node, "'health.tool' must be a program name, not a path",
                     "write the name (it is looked up on PATH)");
  }
  bool has_fields = false;
  for (const std::string& arg : h.args) has_fields |= arg.find("{fields}") != std::string::npos;
  if (!has_fields) {
    return reader.At(node, "'health.args' must contain {fields}",
                     "write the query argument with {fields}, e.g. '--query-gpu={fields}'");
  }
  p.health = std::move(h);
  return OkStatus();
}

Status ReadEnv(const ProfileReader& reader, const YAML::Node& env, DeviceProfile& p) {
  if (!env.IsMap()) {
    return reader.At(env, "'env' must be a mapping of variable names to values",
                     "write it as env: {NAME: value}");
  }
  std::set<std::string> seen;
  for (const auto& entry : env) {
    const std::string name = entry.first.Scalar();
    if (Status ok = CheckEnvName(reader, entry.first, "env", name); !ok.ok()) return ok;
    if (!seen.insert(name).second) {
      return reader.At(entry.first, "'env' sets " + name + " twice", "keep one of them");
    }
    auto value = reader.String(entry.second, "env." + name);
    if (!value.ok()) return value.error();
    p.env.emplace_back(name, *value);
  }
  return OkStatus();
}

Status ReadTopLevel(const ProfileReader& reader, const YAML::Node& root, DeviceProfile& p) {
  bool has_name = false;
  bool has_backend = false;
  YAML::Node devices_node;
  for (const auto& entry : root) {
    if (!entry.first.IsScalar()) {
      return reader.At(entry.first, "keys must be plain names",
                       "known keys: " + JoinKeys(kTopKeys));
    }
    const std::string key = entry.first.Scalar();
    const YAML::Node& value = entry.second;
    if (!IsKnown(key, kTopKeys)) {
      return reader.At(entry.first, "unknown key '" + key + "'",
                       "known keys: " + JoinKeys(kTopKeys));
    }
    if (key == "devices") {
      devices_node = value;
      if (Status ok = ReadDevices(reader, value, p); !ok.ok()) return ok;
      continue;
    }
    if (key == "env" || key == "health") {
      Status ok = key == "env" ? ReadEnv(reader, value, p) : ReadHealth(reader, value, p);
      if (!ok.ok()) return ok;
      continue;
    }
    if (key == "aliases" || key == "visible_env") {
      auto list = reader.StringList(value, key);
      if (!list.ok()) return list.error();
      for (const std::string& item : *list) {
        if (key == "aliases" && !IsProfileName(item)) {
          return reader.At(value, "'aliases': '" + item + "' is not a valid profile name",
                           "use lower-case letters, digits, '.', '_' and '-'");
        }
        if (key == "visible_env") {
          if (Status ok = CheckEnvName(reader, value, key, item); !ok.ok()) return ok;
        }
      }
      (key == "aliases" ? p.aliases : p.visible_env) = std::move(*list);
      continue;
    }
    auto text = reader.String(value, key);
    if (!text.ok()) return text.error();
    if (key == "name") {
      if (!IsProfileName(*text)) {
        return reader.At(value, "'name': '" + *text + "' is not a valid profile name",
                         "use lower-case letters, digits, '.', '_' and '-'");
      }
      p.name = *text;
      has_name = true;
    } else if (key == "description") {
      p.description = *text;
    } else if (key == "container_visible_env") {
      if (Status ok = CheckEnvName(reader, value, key, *text); !ok.ok()) return ok;
      p.container_visible_env = *text;
    } else if (key == "driver_path") {
      p.driver_path = *text;
    } else if (key == "backend") {
      static const std::regex kBackend("[a-z0-9_]+");
      if (!std::regex_match(*text, kBackend)) {
        return reader.At(value, "'backend': '" + *text + "' is not a backend name",
                         "use a torch.distributed backend such as eccl, nccl, hccl, cncl or gloo");
      }
      p.backend = *text;
      has_backend = true;
    } else if (key == "collective_library") {
      p.collective_library = *text;
    } else if (key == "python_module") {
      p.python_module = *text;
    } else if (key == "socket_ifname_env") {
      if (Status ok = CheckEnvName(reader, value, key, *text); !ok.ok()) return ok;
      p.socket_ifname_env = *text;
    } else if (key == "auto_order") {
      static const std::regex kInt("-?[0-9]{1,6}");
      if (!std::regex_match(*text, kInt)) {
        return reader.At(value, "'auto_order' must be an integer", "write it as auto_order: 10");
      }
      p.auto_order = std::stoi(*text);
    }
  }
  if (!has_name) {
    return reader.At(root, "missing required key 'name'", "add name: my-device");
  }
  if (!has_backend) {
    return reader.At(root, "missing required key 'backend'",
                     "add backend: gloo (or eccl, nccl, ...)");
  }
  if (p.has_devices() && p.visible_env.empty()) {
    return reader.At(devices_node, "a profile with 'devices' needs 'visible_env'",
                     "name the process-level visible-devices variable, e.g. visible_env: "
                     "[CUDA_VISIBLE_DEVICES]");
  }
  for (const auto& [name, value] : p.env) {
    if (std::find(p.visible_env.begin(), p.visible_env.end(), name) != p.visible_env.end()) {
      return reader.At(root, "'env' sets " + name + ", which gculaunch sets from the card pool",
                       "remove it from env:");
    }
  }
  return OkStatus();
}

}  // namespace

namespace {

Result<DeviceProfile> Parse(const std::string& yaml_text, const std::string& origin) {
  ProfileReader reader(origin);
  try {
    YAML::Node root = YAML::Load(yaml_text);
    if (!root.IsMap()) {
      return Error{origin + ":" + std::to_string(root.Mark().line + 1) +
                       ": a device profile must be a YAML mapping",
                   "start with name: and backend: keys"};
    }
    DeviceProfile profile;
    if (Status ok = ReadTopLevel(reader, root, profile); !ok.ok()) return ok.error();
    profile.source = origin;
    return profile;
  } catch (const YAML::Exception& e) {
    // e.mark.line is 0-based; e.msg is yaml-cpp's one-line reason.
    return Error{origin + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg,
                 "fix the YAML syntax"};
  }
}

}  // namespace

Result<DeviceProfile> ParseDeviceProfile(const std::string& yaml_text, const std::string& origin) {
  auto profile = Parse(yaml_text, origin);
  if (!profile.ok()) return OneLine(profile.error());
  return profile;
}

const std::vector<DeviceProfile>& BuiltinDeviceProfiles() {
  static const std::vector<DeviceProfile> profiles = [] {
    std::vector<DeviceProfile> out;
    for (const auto& [path, text] : BuiltinProfileTexts()) {
      auto parsed = ParseDeviceProfile(std::string(text), std::string(path));
      if (!parsed.ok()) {
        // Impossible in a tested build: device_profile_test parses every shipped file.
        std::fprintf(stderr, "%s\n", parsed.error().Format().c_str());
        std::abort();
      }
      parsed->source = "built-in";
      out.push_back(std::move(*parsed));
    }
    std::stable_sort(out.begin(), out.end(), [](const DeviceProfile& a, const DeviceProfile& b) {
      return a.auto_order != b.auto_order ? a.auto_order < b.auto_order : a.name < b.name;
    });
    return out;
  }();
  return profiles;
}

std::string BuiltinProfileNames() {
  std::string out;
  for (const DeviceProfile& p : BuiltinDeviceProfiles()) {
    if (!out.empty()) out += ", ";
    out += p.aliases.empty() ? p.name : p.aliases.front();
  }
  return out;
}

Result<DeviceProfile> FindBuiltinProfile(const std::string& name) {
  for (const DeviceProfile& p : BuiltinDeviceProfiles()) {
    if (p.name == name || std::find(p.aliases.begin(), p.aliases.end(), name) != p.aliases.end()) {
      return p;
    }
  }
  return Error{"no device profile named '" + name + "'",
               "use one of " + BuiltinProfileNames() + ", auto, or a YAML file path"};
}

std::vector<int> DeviceProbe::AllowedCpus() const {
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CpuCount(); ++cpu) cpus.push_back(cpu);
  return cpus;
}

}  // namespace gculaunch
