#include "launcher/frontend/launch_spec.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "base/one_line.h"
#include "launcher/frontend/job_file.h"
#include "launcher/frontend/platform.h"
#include "launcher/frontend/spec_builder.h"

// MakeLaunchSpec: the job file merged below the command line, the platform read, then
// SpecBuilder's steps in order (spec_builder.h; the steps are in spec_topology.cc,
// spec_device.cc and spec_program.cc).

namespace gculaunch {

Result<LaunchSpec> SpecBuilder::Build() {
  for (Status (SpecBuilder::*step)() :
       {&SpecBuilder::ExitCodes, &SpecBuilder::Topology, &SpecBuilder::Rendezvous,
        &SpecBuilder::Master, &SpecBuilder::StorePorts, &SpecBuilder::Device, &SpecBuilder::Pool,
        &SpecBuilder::Nproc, &SpecBuilder::Cards, &SpecBuilder::Affinity, &SpecBuilder::Program,
        &SpecBuilder::Environment, &SpecBuilder::Output, &SpecBuilder::Extras,
        &SpecBuilder::Metrics, &SpecBuilder::StoreAccess, &SpecBuilder::LoopStop,
        &SpecBuilder::Health, &SpecBuilder::ExitBarrier}) {
    if (Status ok = (this->*step)(); !ok.ok()) return ok.error();
  }
  spec_.layout_sources = FormatLayoutSources(from_);
  spec_.layout = FormatLayout(spec_);
  if (spec_.elastic()) {
    Note(
        "elastic: WORLD_SIZE, RANK, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK, "
        "ROLE_WORLD_SIZE and TORCHELASTIC_RESTART_COUNT follow each epoch's plan and may "
        "change from one epoch to the next; shown here for node rank " +
        std::to_string(spec_.node_rank) + " of " + std::to_string(spec_.nnodes) + " nodes");
  } else if (spec_.node_rank_at_rendezvous()) {
    Note(
        "node rank: assigned at rendezvous (--rdzv-backend c10d without a node rank, as "
        "torchrun does); RANK, GROUP_RANK and the rank offset follow the plan; shown here for "
        "node rank " +
        std::to_string(spec_.node_rank) + " of " + std::to_string(spec_.nnodes) + " nodes");
  } else if (spec_.nnodes > 1) {
    Note("ranks " + std::to_string(spec_.rank_offset) + "-" +
         std::to_string(spec_.rank_offset + spec_.nproc_per_node - 1) + " of " +
         std::to_string(spec_.world_size) + " assume " + std::to_string(spec_.nproc_per_node) +
         " ranks on every node (RANK = node rank x " + std::to_string(spec_.nproc_per_node) +
         " + local rank)");
  }
  return std::move(spec_);
}

namespace {

// --job: the file's settings merged below the command line and PET_*
// (job_file.h), before anything else looks at the options (the platform
// layer included: a job file's values count as given).
struct MergedOptions {
  CliOptions options;
  std::vector<std::string> notes;
};

Result<MergedOptions> MergeJobFile(const CliOptions& options, const FileAccess& files) {
  MergedOptions merged{options, {}};
  if (!options.job) return merged;
  auto text = files.ReadTextFile(*options.job);
  if (!text.ok()) {
    return OneLine(Error{
        options.Source("job") + ": " + text.error().what,
        text.error().hint.empty() ? "give the path of an existing job file" : text.error().hint});
  }
  auto job = ParseJobFile(*text, *options.job);
  if (!job.ok()) return job.error();
  auto notes = ApplyJobFile(*job, merged.options);
  if (!notes.ok()) return notes.error();
  merged.notes = std::move(*notes);
  if (merged.options.script.empty()) {
    return OneLine(
        Error{"no SCRIPT given: neither the command line nor " + *options.job + " names one",
              "add script: to the job file, or give SCRIPT after the flags"});
  }
  return merged;
}

Result<LaunchSpec> BuildSpec(const MergedOptions& merged, const EnvMap& env,
                             const DeviceProbe& probe, const FileAccess& files,
                             const PlatformInfo& platform) {
  auto spec = SpecBuilder(merged.options, env, probe, files, platform).Build();
  if (!spec.ok()) return OneLine(spec.error());
  spec->notes.insert(spec->notes.begin(), merged.notes.begin(), merged.notes.end());
  for (std::string& note : spec->notes) note = OneLine(note);
  for (std::string& warning : spec->warnings) warning = OneLine(warning);
  spec->layout = OneLine(spec->layout);
  return spec;
}

}  // namespace

Result<LaunchSpec> MakeLaunchSpec(const CliOptions& options, const EnvMap& env,
                                  const DeviceProbe& probe, const FileAccess& files) {
  auto merged = MergeJobFile(options, files);
  if (!merged.ok()) return merged.error();
  auto platform = ReadPlatform(env, merged->options);
  if (!platform.ok()) return OneLine(platform.error());
  return BuildSpec(*merged, env, probe, files, *platform);
}

Result<LaunchSpec> MakeLaunchSpec(const CliOptions& options, const EnvMap& env,
                                  const DeviceProbe& probe, const FileAccess& files,
                                  const PlatformInfo& platform) {
  auto merged = MergeJobFile(options, files);
  if (!merged.ok()) return merged.error();
  return BuildSpec(*merged, env, probe, files, platform);
}

bool RunsAsCluster(const LaunchSpec& spec) {
  return spec.nnodes > 1 || CapabilitiesOf(spec.rdzv).elected_leader;
}

std::string RunLogRoot(const LaunchSpec& spec, const std::string& run_id) {
  if (!spec.log_dir.empty()) return spec.log_dir + "/" + run_id + "_<random>";
  if (!WantsLogFiles(spec)) return "";
  return "<TMPDIR>/torchelastic_<random>/" + run_id + "_<random>";
}

bool WantsLogFiles(const LaunchSpec& spec) {
  return !spec.log_dir.empty() || spec.redirects.any() || spec.tee.any() ||
         !spec.duplicate_stdout_filters.empty() || !spec.duplicate_stderr_filters.empty();
}

int LoggedStreams(const LaunchSpec& spec, int local_rank) {
  // A --log-dir the user asked for keeps every rank's whole output (gculaunch's own rule).
  if (!spec.log_dir.empty()) return StdStreams::kStdout | StdStreams::kStderr;
  // The kept torchelastic_ directory in TMPDIR: torchrun's DefaultLogsSpecs, redirects |= tee,
  // and only those streams get a file.
  return spec.redirects.For(local_rank) | spec.tee.For(local_rank);
}

std::string FilteredLogName(FilteredStream stream) {
  return stream == FilteredStream::kStdout ? "filtered_stdout.log" : "filtered_stderr.log";
}

const std::vector<std::string>& DuplicateFilters(const LaunchSpec& spec, FilteredStream stream) {
  return stream == FilteredStream::kStdout ? spec.duplicate_stdout_filters
                                           : spec.duplicate_stderr_filters;
}

std::vector<int> FilteredLocalRanks(const LaunchSpec& spec, FilteredStream stream) {
  std::vector<int> ranks;
  if (DuplicateFilters(spec, stream).empty()) return ranks;
  const int bit = stream == FilteredStream::kStdout ? StdStreams::kStdout : StdStreams::kStderr;
  const std::vector<int>& shown = spec.console_local_ranks;
  for (int lr = 0; lr < spec.nproc_per_node; ++lr) {
    if ((spec.tee.For(lr) & bit) == 0) continue;
    if (!shown.empty() && std::find(shown.begin(), shown.end(), lr) == shown.end()) continue;
    ranks.push_back(lr);
  }
  return ranks;
}

}  // namespace gculaunch
