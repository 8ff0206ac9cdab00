#include "launcher/frontend/profile_catalog.h"

#include <catch2/catch.hpp>

#include "launcher/frontend/cli.h"
#include "launcher/sys/local_files.h"
#include "tests/support/frontend_fakes.h"

namespace gculaunch {
namespace {

using testing::FakeDeviceProbe;
using testing::TempDir;

std::string BuiltinText(const std::string& path) {
  for (const auto& [name, text] : BuiltinProfileTexts()) {
    if (name == path) return std::string(text);
  }
  FAIL("no built-in " << path);
  return "";
}

TEST_CASE("profile catalog: the search path", "[profile_catalog]") {
  CHECK(ProfileSearchPath({}) == std::vector<std::string>{"/etc/gculaunch/devices",
                                                          "/usr/local/share/gculaunch/devices",
                                                          "/usr/share/gculaunch/devices"});
  CHECK(ProfileSearchPath({{"GCULAUNCH_PROFILE_PATH", "/a::/b"}}) ==
        std::vector<std::string>{"/a", "/b"});
  CHECK(ProfileSearchPath({{"GCULAUNCH_PROFILE_PATH", ""}}).empty());
}

TEST_CASE("profile catalog: directories override and extend the built-in profiles",
          "[profile_catalog]") {
  TempDir etc;
  TempDir share;
  LocalFileAccess files;
  // The package's unchanged copy changes nothing.
  share.Write("enflame-gcu.yaml", BuiltinText("configs/devices/enflame-gcu.yaml"));
  share.Write("site-npu.yaml",
              "name: site-npu\naliases: [snpu]\nbackend: hccl\n"
              "visible_env: [SITE_VISIBLE]\ndevices: {pattern: 'snpu([0-9]+)'}\n"
              "auto_order: 5\n");
  share.Write("README.md", "not a profile");
  // The site's override of the GCU profile, in /etc (first on the path).
  etc.Write("gcu-site.yaml",
            "name: enflame-gcu\naliases: [gcu]\nbackend: eccl\n"
            "visible_env: [TOPS_VISIBLE_DEVICES]\n"
            "devices: {pattern: 'gcu([0-9]+)'}\n"
            "env: {ECCL_SOCKET_IFNAME: ib0}\nauto_order: 10\n");
  auto catalog = LoadProfileCatalog({etc.path(), share.path()}, files);
  REQUIRE(catalog.ok());
  auto gcu = FindProfile(*catalog, "gcu");
  REQUIRE(gcu.ok());
  CHECK(gcu->source == etc.path() + "/gcu-site.yaml");
  CHECK(gcu->env ==
        std::vector<std::pair<std::string, std::string>>{{"ECCL_SOCKET_IFNAME", "ib0"}});
  auto site = FindProfile(*catalog, "snpu");
  REQUIRE(site.ok());
  CHECK(site->name == "site-npu");
  CHECK(catalog->profiles.front().name == "site-npu");  // auto_order 5 comes first
  CHECK(FindProfile(*catalog, "cuda")->source == "built-in");
  CHECK(ProfileNames(*catalog) == "snpu, gcu, cuda, ascend, mlu, rocm, cpu");
  CHECK(FindProfile(*catalog, "tpu").error().Format() ==
        "gculaunch: no device profile named 'tpu' (fix: use one of snpu, gcu, cuda, ascend, mlu, "
        "rocm, cpu, auto, or a YAML file path)");

  // Missing directories are skipped; nothing else changes.
  auto plain = LoadProfileCatalog({etc.path() + "/nope"}, files);
  REQUIRE(plain.ok());
  CHECK(plain->profiles.size() == BuiltinDeviceProfiles().size());
}

TEST_CASE("profile catalog: a broken file is an error naming it", "[profile_catalog]") {
  TempDir etc;
  etc.Write("bad.yml", "name: bad\nbackend: gloo\nvisble_env: [X]\n");
  LocalFileAccess files;
  auto catalog = LoadProfileCatalog({etc.path()}, files);
  REQUIRE_FALSE(catalog.ok());
  CHECK(catalog.error().what == etc.path() + "/bad.yml:3: unknown key 'visble_env'");
}

TEST_CASE("profile catalog: --device finds the site's profile through GCULAUNCH_PROFILE_PATH",
          "[profile_catalog]") {
  TempDir etc;
  etc.Write("site.yaml",
            "name: site-cpu\naliases: [site]\nbackend: gloo\n"
            "env: {SITE_TUNING: '1'}\n");
  FakeDeviceProbe probe;
  LocalFileAccess files;
  EnvMap env{{"PATH", "/usr/bin:/bin"}, {"GCULAUNCH_PROFILE_PATH", etc.path()}};
  auto cli = ParseCli({"--device", "site", "--dry-run", "train.py"}, env);
  REQUIRE(cli.ok());
  auto spec = MakeLaunchSpec(cli->options, env, probe, files);
  if (!spec.ok()) FAIL(spec.error().Format());
  CHECK(spec->profile.name == "site-cpu");
  CHECK(std::find(spec->notes.begin(), spec->notes.end(),
                  "device profile site-cpu from " + etc.path() + "/site.yaml") !=
        spec->notes.end());
  CHECK(spec->profile.env ==
        std::vector<std::pair<std::string, std::string>>{{"SITE_TUNING", "1"}});
}

}  // namespace
}  // namespace gculaunch
