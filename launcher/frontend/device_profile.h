// DeviceProfile: what gculaunch knows about one kind of accelerator.
//
// Profiles are YAML files (configs/devices/*.yaml).  The ones shipped with
// gculaunch are compiled into the binary, so the self-contained executable
// needs no data files; `--device PATH.yaml` loads a user's own.  A profile
// names the process-level visible-devices variable(s), how to count cards
// from device files (no Python, no vendor tool), the collective backend and
// library, and extra environment for the ranks.
//
// DeviceProbe is the only way the core looks at /dev and /sys, so tests run
// against fake trees; the real one is sys/device_probe.h.
//
// Thread safety: plain values; a DeviceProbe is used from one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace gculaunch {

/// One field of a vendor tool's health query and what makes a card unhealthy
/// (docs/device-profiles.md, "Health checks").
struct HealthField {
  std::string name;  ///< as the tool spells it, e.g. "ecc.errors.uncorrected.volatile.total"
  /// "above N": a whole number greater than N; any other text: that value (case-insensitive,
  /// e.g. "Yes").  Values in brackets ("[N/A]", "[Not Supported]") and "N/A" are never judged.
  std::string unhealthy;
  std::string says;  ///< what an unhealthy value means, e.g. "uncorrectable ECC errors"
};

/// The vendor's management tool as a health check: `tool` (looked up on PATH) run with
/// `args`, where "{fields}" stands for the index field and the fields, comma-separated; it
/// prints one comma-separated row per card, the index first.
struct HealthToolSpec {
  std::string tool;               ///< e.g. "nvidia-smi"
  std::vector<std::string> args;  ///< e.g. {"--query-gpu={fields}", "--format=csv,noheader"}
  std::string index_field = "index";
  std::vector<HealthField> fields;
  /// Output text meaning a card is lost from the bus (Xid 79), e.g. "GPU is lost": the cards
  /// without a row are unhealthy.
  std::vector<std::string> lost;
  double timeout_s = 10;  ///< one run's limit; past it every card is unhealthy
  /// `memory:`: the field that says how much device memory a card holds (in MiB), and the
  /// amount below which it counts as freed; before a restart gculaunch waits (bounded by
  /// --device-memory-wait) until every card of the node is below it.  None: no wait.
  struct Memory {
    std::string field;  ///< e.g. "memory.used"
    int64_t below_mib = 0;
  };
  std::optional<Memory> memory;
};

struct DeviceProfile {
  std::string name;                  ///< e.g. "enflame-gcu"
  std::vector<std::string> aliases;  ///< e.g. {"gcu"}: accepted by --device
  std::string description;
  /// Process-level visible-devices variables, all set to the same list.  The
  /// first one is read from the user's environment as the card pool.
  std::vector<std::string> visible_env;
  /// The container runtime's variable (e.g. ENFLAME_VISIBLE_DEVICES, read by
  /// the runtime hook when a container starts).  Informational: used only to
  /// explain in notes that it does not choose the cards inside a running
  /// container.  Empty if the vendor has none.
  std::string container_visible_env;
  /// Directory and ECMAScript regex (matched against the whole file name) of
  /// the device files that count cards; capture group 1 is the card id.
  /// Empty pattern: the profile has no devices (cpu).
  std::string device_dir = "/dev";
  std::string device_pattern;
  /// Optional vendor filter for shared device names (e.g. /dev/dri/renderD*):
  /// a sysfs path where "{name}" stands for the device file's name, and the
  /// id its content must equal (case-insensitive), e.g.
  /// "/sys/class/drm/{name}/device/vendor" and "0x1002".  Empty: no filter.
  std::string vendor_path;
  std::string vendor_id;
  /// `--device auto` tries profiles with devices in ascending auto_order.
  int auto_order = 100;
  std::string driver_path;         ///< e.g. "/sys/module/enflame"; empty if none
  std::string backend;             ///< torch.distributed backend: eccl, nccl, hccl, cncl, gloo
  std::string collective_library;  ///< e.g. "libeccl.so" (file name prefix); empty if none
  std::string python_module;       ///< vendor module, e.g. "torch_gcu"; empty if none
  std::string socket_ifname_env;   ///< e.g. "NCCL_SOCKET_IFNAME"; empty if none
  /// Extra variables for every rank, in file order.  Lowest layer: the user's
  /// environment and --env override them.
  std::vector<std::pair<std::string, std::string>> env;
  std::string source;  ///< "built-in" or the YAML path it was read from
  /// `health:`: the vendor tool that checks the cards before every attempt; none: the
  /// built-in checks only.
  std::optional<HealthToolSpec> health;

  bool has_devices() const { return !device_pattern.empty(); }
};

/// A card found by a DeviceProbe.
struct DeviceFile {
  std::string path;  ///< e.g. "/dev/gcu3"
  std::string id;    ///< the card id from the pattern's capture group, e.g. "3"
};

/// Looks at the machine.  The real one reads the file system under a root
/// prefix ("/" normally; a fake tree in tests).
class DeviceProbe {
 public:
  virtual ~DeviceProbe() = default;
  /// Device files matching the profile, sorted by numeric id.
  virtual std::vector<DeviceFile> FindDevices(const DeviceProfile& profile) const = 0;
  /// Whether `path` (e.g. the driver path) exists.
  virtual bool Exists(const std::string& path) const = 0;
  /// Number of online CPUs (for --nproc-per-node cpu/auto).
  virtual int CpuCount() const = 0;

  // Generic read-only look-ups below the same root, for the preflight check
  // (ld.so.cache, library directories, network interfaces) and CPU affinity
  // (NUMA nodes, CPU lists).  The defaults answer "nothing there", so a probe
  // that only knows about cards stays valid.

  /// The content of the file `path` (bytes, not only text); nullopt if it cannot be read.
  virtual std::optional<std::string> ReadFile(const std::string& /*path*/) const {
    return std::nullopt;
  }
  /// The entry names of directory `path`, sorted; empty if it cannot be read.
  virtual std::vector<std::string> ListDir(const std::string& /*path*/) const { return {}; }
  /// The (major, minor) numbers of `path` when it is a character device file.
  virtual std::optional<std::pair<unsigned, unsigned>> CharDeviceNumber(
      const std::string& /*path*/) const {
    return std::nullopt;
  }
  /// The CPUs a rank started by this process may run on, ascending.  Default:
  /// 0..CpuCount()-1.
  virtual std::vector<int> AllowedCpus() const;
};

/// The YAML text of the profiles shipped in configs/devices, as (path, text)
/// pairs sorted by path.  Generated at build time by cmake/embed_files.cmake.
const std::vector<std::pair<std::string_view, std::string_view>>& BuiltinProfileTexts();

/// Parses one profile from YAML text.  Strict: unknown keys, wrong types and
/// missing required keys are errors naming "<origin>:<line>" and the key
/// ("configs/devices/x.yaml:12: unknown key 'visble_env'").  The schema is in
/// configs/devices/README.md.
Result<DeviceProfile> ParseDeviceProfile(const std::string& yaml_text, const std::string& origin);
/// The profiles compiled into the binary, sorted by (auto_order, name): the
/// order in which `--device auto` tries them.  (A shipped profile that does
/// not parse is a build defect: unit tests parse every one.)
const std::vector<DeviceProfile>& BuiltinDeviceProfiles();
/// Finds a built-in profile by name or alias.  The error lists the known names.
Result<DeviceProfile> FindBuiltinProfile(const std::string& name);
/// "gcu, cuda, cpu, ...": the name or first alias of every built-in profile,
/// for help texts and error messages.
std::string BuiltinProfileNames();

}  // namespace gculaunch
