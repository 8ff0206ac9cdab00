#include "launcher/frontend/device_profile.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "launcher/sys/device_probe.h"
#include "tests/support/frontend_fakes.h"

namespace gculaunch {
namespace {

using testing::TempDir;

std::string ParseError(const std::string& yaml) {
  auto profile = ParseDeviceProfile(yaml, "my.yaml");
  REQUIRE_FALSE(profile.ok());
  return profile.error().Format();
}

const DeviceProfile& Builtin(const std::string& name) {
  for (const DeviceProfile& p : BuiltinDeviceProfiles()) {
    if (p.name == name) return p;
  }
  FAIL("no built-in profile " << name);
  return BuiltinDeviceProfiles().front();
}

TEST_CASE("device profiles: every shipped YAML file parses", "[device_profile]") {
  std::vector<std::string> paths;
  for (const auto& [path, text] : BuiltinProfileTexts()) {
    INFO(path);
    auto profile = ParseDeviceProfile(std::string(text), std::string(path));
    if (!profile.ok()) FAIL(profile.error().Format());
    paths.emplace_back(path);
  }
  CHECK(paths == std::vector<std::string>{
                     "configs/devices/amd-rocm.yaml", "configs/devices/cambricon-mlu.yaml",
                     "configs/devices/cpu.yaml", "configs/devices/enflame-gcu.yaml",
                     "configs/devices/huawei-ascend.yaml", "configs/devices/nvidia-cuda.yaml"});
  std::vector<std::string> order;
  for (const DeviceProfile& p : BuiltinDeviceProfiles()) {
    order.push_back(p.name);
    CHECK(p.source == "built-in");
  }
  // --device auto tries them in this order; cpu is the fallback, last.
  CHECK(order == std::vector<std::string>{"enflame-gcu", "nvidia-cuda", "huawei-ascend",
                                          "cambricon-mlu", "amd-rocm", "cpu"});
}

TEST_CASE("device profiles: enflame-gcu", "[device_profile]") {
  const DeviceProfile& p = Builtin("enflame-gcu");
  CHECK(p.aliases == std::vector<std::string>{"gcu"});
  CHECK(p.visible_env ==
        std::vector<std::string>{"TOPS_VISIBLE_DEVICES", "ENFLAME_VISIBLE_DEVICES"});
  CHECK(p.container_visible_env == "ENFLAME_VISIBLE_DEVICES");
  CHECK(p.device_dir == "/dev");
  CHECK(p.device_pattern == "gcu([0-9]+)");
  CHECK(p.driver_path == "/sys/module/enflame");
  CHECK(p.backend == "eccl");
  CHECK(p.collective_library == "libeccl.so");
  CHECK(p.python_module == "torch_gcu");
  CHECK(p.socket_ifname_env == "ECCL_SOCKET_IFNAME");
  CHECK(p.env == std::vector<std::pair<std::string, std::string>>{
                     {"ECCL_MAX_NCHANNELS", "2"}, {"ECCL_RUNTIME_3_0_ENABLE", "true"}});
}

TEST_CASE("device profiles: nvidia-cuda, cpu and the others", "[device_profile]") {
  const DeviceProfile& cuda = Builtin("nvidia-cuda");
  CHECK(cuda.aliases.front() == "cuda");
  CHECK(cuda.visible_env == std::vector<std::string>{"CUDA_VISIBLE_DEVICES"});
  CHECK(cuda.container_visible_env == "NVIDIA_VISIBLE_DEVICES");
  CHECK(cuda.device_pattern == "nvidia([0-9]+)");
  CHECK(cuda.backend == "nccl");
  CHECK(cuda.env ==
        std::vector<std::pair<std::string, std::string>>{{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}});

  const DeviceProfile& cpu = Builtin("cpu");
  CHECK(cpu.backend == "gloo");
  CHECK_FALSE(cpu.has_devices());
  CHECK(cpu.visible_env.empty());

  CHECK(Builtin("huawei-ascend").visible_env ==
        std::vector<std::string>{"ASCEND_RT_VISIBLE_DEVICES"});
  CHECK(Builtin("huawei-ascend").backend == "hccl");
  CHECK(Builtin("cambricon-mlu").visible_env == std::vector<std::string>{"MLU_VISIBLE_DEVICES"});
  CHECK(Builtin("cambricon-mlu").backend == "cncl");
  CHECK(Builtin("amd-rocm").visible_env == std::vector<std::string>{"ROCR_VISIBLE_DEVICES"});
  CHECK(Builtin("amd-rocm").vendor_id == "0x1002");
}

TEST_CASE("device profiles: lookup by name and alias", "[device_profile]") {
  CHECK(FindBuiltinProfile("gcu")->name == "enflame-gcu");
  CHECK(FindBuiltinProfile("enflame-gcu")->name == "enflame-gcu");
  CHECK(FindBuiltinProfile("cuda")->name == "nvidia-cuda");
  CHECK(FindBuiltinProfile("npu")->name == "huawei-ascend");
  CHECK(FindBuiltinProfile("mlu")->name == "cambricon-mlu");
  CHECK(FindBuiltinProfile("rocm")->name == "amd-rocm");
  CHECK(FindBuiltinProfile("cpu")->name == "cpu");
  auto missing = FindBuiltinProfile("tpu");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().Format() ==
        "gculaunch: no device profile named 'tpu' (fix: use one of gcu, cuda, ascend, mlu, rocm, "
        "cpu, auto, or a YAML file path)");
}

TEST_CASE("device profiles: a minimal user profile", "[device_profile]") {
  auto p = ParseDeviceProfile(R"(
name: my-accel
backend: xccl
visible_env: [XPU_VISIBLE_DEVICES]
devices: {dir: /dev, pattern: 'xpu([0-9]+)'}
env:
  B: 2
  A: "x y"
)",
                              "site/my.yaml");
  REQUIRE(p.ok());
  CHECK(p->name == "my-accel");
  CHECK(p->source == "site/my.yaml");
  CHECK(p->auto_order == 100);
  CHECK(p->env == std::vector<std::pair<std::string, std::string>>{{"B", "2"}, {"A", "x y"}});
}

TEST_CASE("device profiles: strict parsing names file, line and key", "[device_profile]") {
  CHECK(ParseError("name: x\nbackend: gloo\nvisble_env: [A]\n") ==
        "gculaunch: my.yaml:3: unknown key 'visble_env' (fix: known keys: name, aliases, "
        "description, visible_env, container_visible_env, devices, driver_path, backend, "
        "collective_library, python_module, socket_ifname_env, auto_order, env, health)");
  CHECK(ParseError("name: x\nbackend: gloo\ndevices:\n  dir: /dev\n  patern: 'a([0-9])'\n") ==
        "gculaunch: my.yaml:5: unknown key 'devices.patern' (fix: known keys under devices: "
        "dir, pattern, vendor_path, vendor_id)");
  CHECK(ParseError("name: x\nbackend: gloo\naliases: gcu\n") ==
        "gculaunch: my.yaml:3: 'aliases' must be a list of strings (fix: write it as aliases: "
        "[A, B])");
  CHECK(ParseError("name: x\nbackend: [gloo]\n") ==
        "gculaunch: my.yaml:2: 'backend' must be a string (fix: write it as backend: TEXT)");
  CHECK(ParseError("name: x\nbackend: gloo\nauto_order: first\n") ==
        "gculaunch: my.yaml:3: 'auto_order' must be an integer (fix: write it as auto_order: "
        "10)");
  CHECK(ParseError("name: x\nbackend: gloo\nenv:\n  A: [1]\n") ==
        "gculaunch: my.yaml:4: 'env.A' must be a string (fix: write it as env.A: TEXT)");
  CHECK(ParseError("name: x\nbackend: gloo\nenv:\n  A: 1\n  A: 2\n") ==
        "gculaunch: my.yaml:5: 'env' sets A twice (fix: keep one of them)");
  CHECK(ParseError("name: x\nbackend: gloo\nenv:\n  1A: x\n") ==
        "gculaunch: my.yaml:4: 'env': '1A' is not a valid environment variable name (fix: use "
        "letters, digits and '_', not starting with a digit)");
  CHECK(ParseError("backend: gloo\n") ==
        "gculaunch: my.yaml:1: missing required key 'name' (fix: add name: my-device)");
  CHECK(ParseError("name: x\n") ==
        "gculaunch: my.yaml:1: missing required key 'backend' (fix: add backend: gloo (or eccl, "
        "nccl, ...))");
  CHECK(ParseError("name: X Y\nbackend: gloo\n") ==
        "gculaunch: my.yaml:1: 'name': 'X Y' is not a valid profile name (fix: use lower-case "
        "letters, digits, '.', '_' and '-')");
  CHECK(ParseError("name: x\nbackend: gloo\ndevices:\n  pattern: 'gcu[0-9]+'\n") ==
        "gculaunch: my.yaml:4: 'devices.pattern' needs a capture group for the card id (fix: "
        "write it as pattern: 'gcu([0-9]+)')");
  CHECK(ParseError("name: x\nbackend: gloo\ndevices:\n  pattern: 'gcu(['\n")
            .rfind("gculaunch: my.yaml:4: 'devices.pattern' is not a valid regex: ", 0) == 0);
  CHECK(ParseError("name: x\nbackend: gloo\ndevices:\n  pattern: 'gcu([0-9]+)'\n") ==
        "gculaunch: my.yaml:4: a profile with 'devices' needs 'visible_env' (fix: name the "
        "process-level visible-devices variable, e.g. visible_env: [CUDA_VISIBLE_DEVICES])");
  CHECK(ParseError("name: x\nbackend: gloo\nvisible_env: [V]\ndevices:\n  pattern: 'a([0-9])'\n"
                   "  vendor_path: /sys/vendor\n  vendor_id: '0x1'\n") ==
        "gculaunch: my.yaml:5: 'devices.vendor_path' must contain {name} (fix: write it as "
        "vendor_path: /sys/class/drm/{name}/device/vendor)");
  CHECK(ParseError("name: x\nbackend: gloo\nvisible_env: [V]\nenv: {V: '1'}\n") ==
        "gculaunch: my.yaml:1: 'env' sets V, which gculaunch sets from the card pool (fix: "
        "remove it from env:)");
  CHECK(ParseError("name: x\nbackend: gloo\n  bad: [\n") ==
        "gculaunch: my.yaml:3: illegal map value (fix: fix the YAML syntax)");
  CHECK(ParseError("name: \"a\\nb\"\nbackend: gloo\n") ==
        "gculaunch: my.yaml:1: 'name': 'a\\nb' is not a valid profile name (fix: use lower-case "
        "letters, digits, '.', '_' and '-')");
  CHECK(ParseError("- a\n- b\n") ==
        "gculaunch: my.yaml:1: a device profile must be a YAML mapping (fix: start with name: and "
        "backend: keys)");
}

TEST_CASE("device probe: finds device files below the root, sorted by number", "[device_profile]") {
  TempDir root;
  for (const char* name : {"gcu10", "gcu1", "gcu0", "gcuctl", "vgcu0", "gcu2x"}) {
    root.Write(std::string("dev/") + name);
  }
  root.Write("sys/module/enflame/version", "1.0\n");
  FileSystemDeviceProbe probe(root.path());
  const DeviceProfile& gcu = Builtin("enflame-gcu");
  std::vector<std::string> paths;
  std::vector<std::string> ids;
  for (const DeviceFile& f : probe.FindDevices(gcu)) {
    paths.push_back(f.path);
    ids.push_back(f.id);
  }
  CHECK(paths == std::vector<std::string>{"/dev/gcu0", "/dev/gcu1", "/dev/gcu10"});
  CHECK(ids == std::vector<std::string>{"0", "1", "10"});
  CHECK(probe.Exists("/sys/module/enflame"));
  CHECK_FALSE(probe.Exists("/sys/module/nvidia"));
  CHECK(probe.FindDevices(Builtin("nvidia-cuda")).empty());
  CHECK(probe.FindDevices(Builtin("cpu")).empty());
  CHECK(probe.CpuCount() >= 1);
}

TEST_CASE("device probe: a vendor filter keeps only the vendor's render nodes",
          "[device_profile]") {
  TempDir root;
  root.Write("dev/dri/renderD128");
  root.Write("dev/dri/renderD129");
  root.Write("dev/dri/renderD130");  // no sysfs entry: skipped
  root.Write("dev/dri/card0");
  root.Write("sys/class/drm/renderD128/device/vendor", "0x1002\n");
  root.Write("sys/class/drm/renderD129/device/vendor", "0x8086\n");
  FileSystemDeviceProbe probe(root.path());
  auto found = probe.FindDevices(Builtin("amd-rocm"));
  REQUIRE(found.size() == 1);
  CHECK(found[0].path == "/dev/dri/renderD128");
  CHECK(found[0].id == "128");
}

TEST_CASE("device probe: a missing directory finds nothing", "[device_profile]") {
  TempDir root;
  FileSystemDeviceProbe probe(root.path());
  CHECK(probe.FindDevices(Builtin("enflame-gcu")).empty());
}

}  // namespace
}  // namespace gculaunch
