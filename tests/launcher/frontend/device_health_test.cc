#include "launcher/frontend/device_health.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "tests/support/frontend_fakes.h"

namespace gculaunch {
namespace {

std::string Data(const std::string& name) {
  std::ifstream in(std::string(GCULAUNCH_SOURCE_DIR) + "/tests/data/nvidia-smi/" + name);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const HealthToolSpec& Nvidia() {
  static const HealthToolSpec tool = [] {
    auto profile = FindBuiltinProfile("nvidia-cuda");
    REQUIRE(profile.ok());
    REQUIRE(profile->health.has_value());
    return *profile->health;
  }();
  return tool;
}

HealthRun Exited(int code, std::string out, std::string err = "") {
  HealthRun run;
  run.code = code;
  run.out = std::move(out);
  run.err = std::move(err);
  return run;
}

const std::vector<std::string> kEight = {"0", "1", "2", "3", "4", "5", "6", "7"};

HealthRow JudgeFull(const HealthRun& run, const std::vector<std::string>& cards = kEight) {
  return JudgeHealthTool(Nvidia(), {HealthFullQuery(Nvidia())}, {run}, cards);
}

TEST_CASE("device health: the NVIDIA query is the issue's, from the shipped profile",
          "[device_health]") {
  const HealthQuery q = HealthFullQuery(Nvidia());
  CHECK(Nvidia().tool == "nvidia-smi");
  CHECK(q.args ==
        std::vector<std::string>{"--query-gpu=index,ecc.errors.uncorrected.volatile.total,"
                                 "remapped_rows.pending,remapped_rows.failure",
                                 "--format=csv,noheader"});
  const auto one = HealthFieldQueries(Nvidia());
  REQUIRE(one.size() == 3);
  CHECK(one[1].args.front() == "--query-gpu=index,remapped_rows.pending");
  CHECK(one[1].fields == std::vector<std::string>{"index", "remapped_rows.pending"});
}

TEST_CASE("device health: recorded outputs of eight healthy GPUs", "[device_health]") {
  const HealthRow row = JudgeFull(Exited(0, Data("h200_healthy.csv")));
  CHECK(row.verdict == HealthVerdict::kHealthy);
  CHECK(row.cards == kEight);
  CHECK(row.reason ==
        "cards 0,1,2,3,4,5,6,7: ecc.errors.uncorrected.volatile.total, remapped_rows.pending, "
        "remapped_rows.failure fine");
}

TEST_CASE("device health: uncorrectable ECC errors name the card", "[device_health]") {
  const HealthRow row = JudgeFull(Exited(0, Data("h200_ecc_card3.csv")));
  CHECK(row.verdict == HealthVerdict::kUnhealthy);
  CHECK(row.cards == std::vector<std::string>{"3"});
  CHECK(row.reason ==
        "card 3: uncorrectable ECC errors (ecc.errors.uncorrected.volatile.total = 2)");
  SECTION("a card outside the node's pool is another launcher's") {
    CHECK(JudgeFull(Exited(0, Data("h200_ecc_card3.csv")), {"4", "5", "6", "7"}).verdict ==
          HealthVerdict::kHealthy);
  }
}

TEST_CASE("device health: Yes/No remap fields", "[device_health]") {
  const HealthRow row =
      JudgeFull(Exited(0, Data("remap_pending_failed.csv")), {"0", "1", "2", "3"});
  CHECK(row.verdict == HealthVerdict::kUnhealthy);
  CHECK(row.cards == std::vector<std::string>{"1", "2"});
  CHECK(row.reason ==
        "card 1: a row remap is pending (the card needs a reset) (remapped_rows.pending = Yes); "
        "card 2: row remapping failed (remapped_rows.failure = Yes)");
}

TEST_CASE("device health: N/A and Not Supported values are not checked, never unhealthy",
          "[device_health]") {
  const HealthRow row = JudgeFull(Exited(0, Data("mig_na.csv")), {"0", "1"});
  CHECK(row.verdict == HealthVerdict::kHealthy);
  CHECK(row.reason.find("not checked: ecc.errors.uncorrected.volatile.total ([N/A]), "
                        "remapped_rows.pending ([N/A]), remapped_rows.failure ([N/A]), "
                        "ecc.errors.uncorrected.volatile.total ([Not Supported])") !=
        std::string::npos);
}

TEST_CASE("device health: one unknown field costs that field only", "[device_health]") {
  const HealthRun refused = Exited(2, "", Data("unknown_field.stderr"));
  CHECK(HealthNeedsFallback(Nvidia(), refused));
  CHECK_FALSE(HealthNeedsFallback(Nvidia(), Exited(0, Data("h200_healthy.csv"))));
  const auto queries = HealthFieldQueries(Nvidia());
  const std::vector<HealthRun> runs = {Exited(0, "0, 0\n1, 3\n"), Exited(0, "0, No\n1, No\n"),
                                       refused};
  const HealthRow row = JudgeHealthTool(Nvidia(), queries, runs, {"0", "1"});
  CHECK(row.verdict == HealthVerdict::kUnhealthy);
  CHECK(row.reason ==
        "card 1: uncorrectable ECC errors (ecc.errors.uncorrected.volatile.total = 3)");
  const HealthRow fine = JudgeHealthTool(
      Nvidia(), queries, {Exited(0, "0, 0\n"), Exited(0, "0, No\n"), refused}, {"0"});
  CHECK(fine.verdict == HealthVerdict::kHealthy);
  CHECK(fine.reason ==
        "card 0: ecc.errors.uncorrected.volatile.total, remapped_rows.pending, "
        "remapped_rows.failure fine; not checked: remapped_rows.failure (exit code 2: Field "
        "\"remapped_rows.failure\" is not a valid field to query.)");
}

TEST_CASE("device health: a lost GPU makes the cards without a row unhealthy", "[device_health]") {
  const HealthRun run = Exited(15, Data("gpu_lost.csv"), Data("gpu_lost.stderr"));
  CHECK_FALSE(HealthNeedsFallback(Nvidia(), run));
  const HealthRow row = JudgeFull(run, {"0", "1", "2"});
  CHECK(row.verdict == HealthVerdict::kUnhealthy);
  CHECK(row.cards == std::vector<std::string>{"2"});
  CHECK(row.reason.rfind("a card is lost: Unable to determine the device handle for "
                         "GPU0000:04:00.0: GPU is lost.",
                         0) == 0);
}

TEST_CASE("device health: a hung tool makes every card unhealthy, a missing one is not checked",
          "[device_health]") {
  HealthRun hung;
  hung.kind = HealthRun::Kind::kTimedOut;
  hung.timeout_s = 10;
  const HealthRow row = JudgeFull(hung, {"0", "1"});
  CHECK(row.verdict == HealthVerdict::kUnhealthy);
  CHECK(row.cards == std::vector<std::string>{"0", "1"});
  CHECK(row.reason ==
        "the tool hung (still running after 10.0 s; killed): every card counts as unhealthy");
  const HealthRow missing = HealthToolMissing(Nvidia(), "/usr/bin");
  CHECK(missing.verdict == HealthVerdict::kNotChecked);
  CHECK(missing.reason == "nvidia-smi is not installed (not found on PATH)");
  HealthReport report;
  report.rows = {missing};
  CHECK(report.healthy());
}

TEST_CASE("device health: --health-check's exit and first line", "[device_health]") {
  CHECK(JudgeHealthCommand("check.sh", Exited(0, "all good\n"), {"0"}).verdict ==
        HealthVerdict::kHealthy);
  const HealthRow bad =
      JudgeHealthCommand("check.sh", Exited(3, "", "\nfan 2 stopped\nmore\n"), {"0", "1"});
  CHECK(bad.verdict == HealthVerdict::kUnhealthy);
  CHECK(bad.reason == "check.sh exited 3: fan 2 stopped");
  CHECK(bad.cards == std::vector<std::string>{"0", "1"});
  HealthRun hung;
  hung.kind = HealthRun::Kind::kTimedOut;
  hung.timeout_s = 30;
  CHECK(JudgeHealthCommand("check.sh", hung, {"0"}).reason ==
        "check.sh still ran after 30.0 s (--health-check-timeout); killed");
  HealthReport report;
  report.rows = {bad};
  CHECK_FALSE(report.healthy());
  CHECK(report.Describe() == "--health-check: check.sh exited 3: fan 2 stopped");
  CHECK(report.UnhealthyCards() == std::vector<std::string>{"0", "1"});
}

TEST_CASE("device health: built-in rows: device files gone since the start, driver",
          "[device_health]") {
  auto profile = FindBuiltinProfile("nvidia-cuda");
  REQUIRE(profile.ok());
  testing::FakeDeviceProbe probe;
  probe.AddCards("nvidia-cuda", "nvidia", {0, 1});
  probe.existing.insert("/sys/module/nvidia");
  auto rows = JudgeBuiltinHealth(*profile, probe, {"0", "1"}, {"0", "1"});
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].verdict == HealthVerdict::kHealthy);
  CHECK(rows[1].verdict == HealthVerdict::kHealthy);
  rows = JudgeBuiltinHealth(*profile, probe, {"0", "1", "2"}, {"0", "1", "2"});
  CHECK(rows[0].verdict == HealthVerdict::kUnhealthy);
  CHECK(rows[0].cards == std::vector<std::string>{"2"});
  CHECK(rows[0].reason ==
        "device file 2 gone from /dev since gculaunch started (the card left the bus, or its "
        "driver unloaded)");
  probe.existing.clear();
  rows = JudgeBuiltinHealth(*profile, probe, {"0", "1"}, {"0", "1"});
  CHECK(rows[1].verdict == HealthVerdict::kUnhealthy);
  CHECK(rows[1].reason == "the driver is not loaded (/sys/module/nvidia is missing)");
}

TEST_CASE("device health: the profile's health section is parsed strictly", "[device_health]") {
  const std::string head = "name: x\nbackend: gloo\n";
  auto ok = ParseDeviceProfile(head +
                                   "health:\n  tool: smi\n  args: ['-q={fields}']\n"
                                   "  fields:\n    - {name: ecc, unhealthy: above 0}\n",
                               "x.yaml");
  REQUIRE(ok.ok());
  REQUIRE(ok->health);
  CHECK(ok->health->fields.front().says == "ecc above 0");
  CHECK(ok->health->timeout_s == 10);
  auto error = [&](const std::string& body) {
    auto p = ParseDeviceProfile(head + body, "x.yaml");
    REQUIRE_FALSE(p.ok());
    return p.error().Format();
  };
  CHECK(error("health:\n  tool: smi\n  args: ['-q']\n  fields: [{name: a, unhealthy: 'Yes'}]\n") ==
        "gculaunch: x.yaml:4: 'health.args' must contain {fields} (fix: write the query argument "
        "with "
        "{fields}, e.g. '--query-gpu={fields}')");
  CHECK(error("health:\n  tool: smi\n  args: ['{fields}']\n  fields: [{name: a, unhealthy: "
              "above x}]\n") ==
        "gculaunch: x.yaml:6: 'unhealthy: above x' is not 'above N' (fix: write unhealthy: 'above "
        "0' (a "
        "whole number), or the exact bad value)");
  CHECK(error("health:\n  tool: /bin/smi\n  args: ['{fields}']\n  fields: [{name: a, "
              "unhealthy: 'Yes'}]\n") ==
        "gculaunch: x.yaml:4: 'health.tool' must be a program name, not a path (fix: write the "
        "name (it "
        "is looked up on PATH))");
  CHECK(error("health:\n  tol: smi\n") ==
        "gculaunch: x.yaml:4: unknown key 'health.tol' (fix: known keys under health: tool, args, "
        "index, "
        "fields, lost, timeout, memory)");
}

TEST_CASE("device health: the profile's memory entry", "[device_health]") {
  const std::string head =
      "name: x\nbackend: gloo\nhealth:\n  tool: smi\n  args: ['-q={fields}']\n"
      "  fields: [{name: ecc, unhealthy: above 0}]\n";
  auto ok = ParseDeviceProfile(head + "  memory: {field: memory.used, below_mib: 512}\n", "x.yaml");
  REQUIRE(ok.ok());
  REQUIRE(ok->health->memory);
  CHECK(ok->health->memory->field == "memory.used");
  CHECK(ok->health->memory->below_mib == 512);
  CHECK_FALSE(ParseDeviceProfile(head, "x.yaml")->health->memory.has_value());
  auto error = [&](const std::string& body) {
    auto p = ParseDeviceProfile(head + body, "x.yaml");
    REQUIRE_FALSE(p.ok());
    return p.error().Format();
  };
  const std::string needs =
      "gculaunch: x.yaml:7: 'health.memory' needs 'field' and 'below_mib' (a whole number > 0) "
      "(fix: write it as memory: {field: memory.used, below_mib: 1024})";
  CHECK(error("  memory: {field: memory.used}\n") == needs);
  CHECK(error("  memory: {field: memory.used, below_mib: 0}\n") == needs);
  CHECK(error("  memory: {field: memory.used, below_mib: 1.5}\n") == needs);
  CHECK(error("  memory: {below_mib: 100}\n") == needs);
  CHECK(error("  memory: {field: memory.used, below: 100}\n") ==
        "gculaunch: x.yaml:7: unknown key 'health.memory.below' (fix: known keys: field, "
        "below_mib)");
  CHECK(error("  memory: memory.used\n") ==
        "gculaunch: x.yaml:7: 'health.memory' must be a mapping (fix: write it as memory: "
        "{field: memory.used, below_mib: 1024})");
}

TEST_CASE("device health: the memory query and which cards still hold memory", "[device_health]") {
  REQUIRE(Nvidia().memory);
  const HealthQuery q = HealthMemoryQuery(Nvidia());
  CHECK(q.args ==
        std::vector<std::string>{"--query-gpu=index,memory.used", "--format=csv,noheader"});
  CHECK(q.fields == std::vector<std::string>{"index", "memory.used"});
  const std::string out = "0, 3 MiB\n1, 80123 MiB\n2, [N/A]\n3, 256 MiB\n";
  auto held = JudgeHealthMemory(Nvidia(), Exited(0, out), {"0", "1", "2", "3"});
  REQUIRE(held.ok());
  REQUIRE(held->size() == 2);  // at or above 256 MiB; [N/A] counts as freed
  CHECK(DescribeHeldMemory(*held) == "card 1: 80123 MiB, card 3: 256 MiB");
  // Cards outside the node's pool are not waited for.
  held = JudgeHealthMemory(Nvidia(), Exited(0, out), {"0", "3"});
  REQUIRE(held.ok());
  CHECK(DescribeHeldMemory(*held) == "card 3: 256 MiB");
  CHECK(JudgeHealthMemory(Nvidia(), Exited(0, "0, 0 MiB\n1, 1\n"), {})->empty());
  auto failed = JudgeHealthMemory(Nvidia(), Exited(9, "", "NVIDIA-SMI has failed"), {});
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().what ==
        "nvidia-smi could not tell memory.used (exit code 9: NVIDIA-SMI has failed)");
  failed = JudgeHealthMemory(Nvidia(), Exited(0, "0, lots\n"), {});
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().what == "nvidia-smi printed no readable memory.used row ('0, lots')");
}

}  // namespace
}  // namespace gculaunch
