#include "launcher/frontend/job_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>
#include <string_view>
#include <vector>

#include "base/one_line.h"
#include "base/text.h"
#include "launcher/frontend/cli.h"

// The yaml-cpp adapter for job files: yaml-cpp exceptions are caught in
// ParseJobFile and become Errors naming the file and line.

namespace gculaunch {
namespace {

constexpr const char* kConfigMarker = "{config}";

// The flag names a job file can use, in the '_' spelling.
const std::vector<std::string>& KnownKeys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> out = {"script", "args", "env", "configs"};
    for (std::string key : CanonicalFlagNames()) {
      if (key == "job") continue;
      std::replace(key.begin(), key.end(), '-', '_');
      out.push_back(key);
    }
    return out;
  }();
  return keys;
}

std::string Suggest(const std::string& key) {
  std::string lowered = key;
  std::replace(lowered.begin(), lowered.end(), '-', '_');
  std::string best;
  size_t best_distance = 3;
  for (const std::string& known : KnownKeys()) {
    const size_t d = EditDistance(lowered, known);
    if (d < best_distance) {
      best_distance = d;
      best = known;
    }
  }
  return best;
}

class JobReader {
 public:
  explicit JobReader(const std::string& origin) : origin_(origin) {}

  std::string At(const YAML::Node& node) const {
    return origin_ + ":" + std::to_string(node.Mark().line + 1);
  }
  Error Bad(const YAML::Node& node, const std::string& what, const std::string& hint) const {
    return Error{At(node) + ": " + what, hint};
  }

  // A value is text: an explicit tag (!!binary, !!str, !custom) would change what it means,
  // so none is taken.  yaml-cpp marks untagged nodes "?" (plain) or "!" (quoted).
  Status CheckTag(const YAML::Node& node) const {
    const std::string& tag = node.Tag();
    if (tag.empty() || tag == "?" || tag == "!") return OkStatus();
    constexpr std::string_view kCore = "tag:yaml.org,2002:";
    const std::string shown = tag.rfind(kCore, 0) == 0 ? "!!" + tag.substr(kCore.size()) : tag;
    return Bad(node, "the YAML tag '" + shown + "' is not supported in a job file",
               "drop the tag and write the value as plain text");
  }

  Result<JobFile> Read(const YAML::Node& root) {
    JobFile job;
    job.origin = origin_;
    if (Status tag = CheckTag(root); !tag.ok()) return tag.error();
    if (!root.IsMap()) {
      return Bad(root, "a job file must be a YAML mapping of keys to values",
                 "start with keys such as script: and nproc_per_node:");
    }
    std::map<std::string, int> seen;  // canonical key -> line
    YAML::Node args_node;
    for (const auto& entry : root) {
      if (!entry.first.IsScalar()) {
        return Bad(entry.first, "keys must be plain names", "write key: value");
      }
      if (Status tag = CheckTag(entry.first); !tag.ok()) return tag.error();
      if (Status tag = CheckTag(entry.second); !tag.ok()) return tag.error();
      const std::string key = entry.first.Scalar();
      const YAML::Node& value = entry.second;
      std::string canonical = key;
      if (key != "script" && key != "args" && key != "env" && key != "configs") {
        if (key == "job") {
          return Bad(entry.first, "key 'job': a job file cannot name another job file",
                     "merge the two files");
        }
        auto flag = CanonicalFlagName(key);
        if (!flag) {
          const std::string suggestion = Suggest(key);
          return Bad(entry.first, "unknown key '" + key + "'",
                     (suggestion.empty() ? "" : "did you mean " + suggestion + "? ") +
                         "keys are script, args, env, configs and gculaunch's flags "
                         "(nproc_per_node, device, log_dir, ...; see gculaunch --help)");
        }
        canonical = *flag;
      }
      const int line = entry.first.Mark().line + 1;
      if (auto [it, inserted] = seen.emplace(canonical, line); !inserted) {
        return Bad(
            entry.first,
            "key '" + key + "' is given twice (also on line " + std::to_string(it->second) + ")",
            "keep one of them");
      }
      Status ok = OkStatus();
      if (key == "script") {
        ok = ReadScript(entry.first, value, job);
      } else if (key == "args") {
        args_node = entry.first;
        ok = ReadArgs(value, job);
      } else if (key == "env") {
        ok = ReadEnv(entry.first, value, job);
      } else if (key == "configs") {
        ok = ReadConfigs(entry.first, value, job);
      } else {
        ok = ReadSetting(entry.first, key, canonical, value, job);
      }
      if (!ok.ok()) return ok.error();
    }
    if (job.args_use_config && job.configs.empty()) {
      return Bad(args_node, "'args' uses {config} but the file has no configs:",
                 "add configs: with one entry per total card count, e.g. configs: {8: a.py}");
    }
    return job;
  }

 private:
  Status ReadScript(const YAML::Node& key, const YAML::Node& value, JobFile& job) {
    if (!value.IsScalar() || value.Scalar().empty()) {
      return Bad(value.IsNull() ? key : value, "'script' must be a file name or module",
                 "write it as script: tools/train.py");
    }
    job.script = value.Scalar();
    job.script_source = At(key);
    return OkStatus();
  }

  Status ReadArgs(const YAML::Node& value, JobFile& job) {
    if (!value.IsSequence()) {
      return Bad(value, "'args' must be a list", "write it as args: [\"{config}\", --amp]");
    }
    for (const YAML::Node& item : value) {
      if (Status tag = CheckTag(item); !tag.ok()) return tag;
      if (!item.IsScalar()) {
        return Bad(item, "'args' must be a list of plain values",
                   "write each argument as text, e.g. - --epochs");
      }
      job.args.push_back(item.Scalar());
      if (item.Scalar().find(kConfigMarker) != std::string::npos) job.args_use_config = true;
    }
    return OkStatus();
  }

  Status ReadEnv(const YAML::Node& key, const YAML::Node& value, JobFile& job) {
    if (!value.IsMap()) {
      return Bad(value.IsNull() ? key : value,
                 "'env' must be a mapping of variable names to values",
                 "write it as env: {ECCL_DEBUG: INFO}");
    }
    std::set<std::string> names;
    for (const auto& item : value) {
      if (Status tag = CheckTag(item.first); !tag.ok()) return tag;
      if (Status tag = CheckTag(item.second); !tag.ok()) return tag;
      const std::string name = item.first.Scalar();
      if (!item.first.IsScalar() || !IsEnvName(name)) {
        return Bad(item.first, "env: '" + name + "' is not a valid variable name",
                   "use letters, digits and '_', not starting with a digit");
      }
      if (!names.insert(name).second) {
        return Bad(item.first, "env: " + name + " is set twice", "keep one of them");
      }
      if (!item.second.IsScalar()) {
        return Bad(item.second.IsNull() ? item.first : item.second,
                   "env: " + name + " must be a single value",
                   "write it as " + name + ": \"value\" (quote it when in doubt)");
      }
      job.env.emplace_back(name, item.second.Scalar());
    }
    job.env_source = At(key) + ": env";
    return OkStatus();
  }

  Status ReadConfigs(const YAML::Node& key, const YAML::Node& value, JobFile& job) {
    if (!value.IsMap() || value.size() == 0) {
      return Bad(value.IsNull() ? key : value,
                 "'configs' must map total card counts to config files",
                 "write it as configs: {8: configs/train_8card.py, 16: configs/train_16card.py}");
    }
    for (const auto& item : value) {
      if (Status tag = CheckTag(item.first); !tag.ok()) return tag;
      if (Status tag = CheckTag(item.second); !tag.ok()) return tag;
      const std::string count_text = item.first.IsScalar() ? item.first.Scalar() : "";
      int count = 0;
      const char* end = count_text.data() + count_text.size();
      auto [ptr, ec] = std::from_chars(count_text.data(), end, count);
      if (count_text.empty() || ec != std::errc() || ptr != end || count < 1) {
        return Bad(item.first, "configs: '" + count_text + "' is not a card count",
                   "use the total number of cards (ranks) of the job, e.g. 8: or 16:");
      }
      if (job.configs.count(count) != 0) {
        return Bad(item.first, "configs: " + std::to_string(count) + " is given twice",
                   "keep one of them");
      }
      if (!item.second.IsScalar() || item.second.Scalar().empty()) {
        return Bad(item.second.IsNull() ? item.first : item.second,
                   "configs: " + std::to_string(count) + " must name one config file",
                   "write it as " + std::to_string(count) + ": configs/train.py");
      }
      job.configs[count] = item.second.Scalar();
    }
    job.configs_source = At(key);
    return OkStatus();
  }

  Status ReadSetting(const YAML::Node& key, const std::string& written, const std::string& flag,
                     const YAML::Node& value, JobFile& job) {
    if (value.IsNull() || (value.IsScalar() && value.Scalar().empty())) {
      return Bad(key, "'" + written + "' has no value", "give one, or remove the key");
    }
    if (!value.IsScalar()) {
      return Bad(value,
                 "'" + written + "' must be a single value, not a " +
                     (value.IsSequence() ? "list" : "mapping"),
                 "write it as " + written + ": VALUE (lists as text, e.g. 0,1)");
    }
    job.settings.push_back({flag, value.Scalar(), At(key) + ": " + written});
    return OkStatus();
  }

  const std::string& origin_;
};

std::string Counts(const std::map<int, std::string>& configs) {
  std::string out;
  for (const auto& [count, path] : configs) {
    if (!out.empty()) out += ", ";
    out += std::to_string(count);
  }
  return out;
}

Result<JobFile> Parse(const std::string& yaml_text, const std::string& origin) {
  try {
    const std::vector<YAML::Node> documents = YAML::LoadAll(yaml_text);
    if (documents.size() > 1) {
      const int line = documents[1].Mark().line;
      return Error{origin + (line >= 0 ? ":" + std::to_string(line + 1) : "") +
                       ": a second YAML document ('---'); a job file holds one",
                   "remove the '---' line and what follows, or move it into a job file of its "
                   "own"};
    }
    return JobReader(origin).Read(documents.empty() ? YAML::Node() : documents.front());
  } catch (const YAML::Exception& e) {
    return Error{origin + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg,
                 "fix the YAML syntax"};
  }
}

}  // namespace

Result<JobFile> ParseJobFile(const std::string& yaml_text, const std::string& origin) {
  auto job = Parse(yaml_text, origin);
  if (!job.ok()) return OneLine(job.error());
  return job;
}

Result<std::vector<std::string>> ApplyJobFile(const JobFile& job, CliOptions& options) {
  std::vector<std::string> notes;
  for (const JobFile::Setting& setting : job.settings) {
    if (options.Given(setting.flag)) {
      notes.push_back(setting.source + " " + setting.value + " is overridden by " +
                      options.Source(setting.flag));
      continue;
    }
    if (Status ok = ApplyFlagText(setting.flag, setting.source, setting.value, options); !ok.ok()) {
      return ok.error();
    }
  }
  if (!job.env.empty()) {
    std::vector<std::pair<std::string, std::string>> env = job.env;
    env.insert(env.end(), options.env.begin(), options.env.end());
    options.env = std::move(env);
    options.given.emplace("env", job.env_source);
  }
  if (options.script.empty()) {
    if (job.script) {
      options.script = *job.script;
      options.script_args = job.args;
    }
  } else if (job.script || !job.args.empty()) {
    notes.push_back("SCRIPT " + options.script +
                    " from the command line replaces the script and "
                    "args of " +
                    job.origin);
  }
  options.job_configs = job.configs;
  options.job_configs_source = job.configs_source;
  for (std::string& note : notes) note = OneLine(note);
  return notes;
}

Result<std::vector<std::string>> SelectConfig(const CliOptions& options, int world_size, int nnodes,
                                              int nproc_per_node, std::string* note) {
  std::vector<std::string> args = options.script_args;
  if (options.job_configs.empty()) return args;
  const bool wanted = std::any_of(args.begin(), args.end(), [](const std::string& arg) {
    return arg.find(kConfigMarker) != std::string::npos;
  });
  if (!wanted) return args;
  auto it = options.job_configs.find(world_size);
  if (it == options.job_configs.end()) {
    return OneLine(
        Error{options.job_configs_source + ": configs has no entry for " +
                  std::to_string(world_size) + " cards (" + std::to_string(nnodes) + " node" +
                  (nnodes == 1 ? "" : "s") + " x " + std::to_string(nproc_per_node) + " rank" +
                  (nproc_per_node == 1 ? "" : "s") + "); it has " + Counts(options.job_configs),
              "add '" + std::to_string(world_size) +
                  ": <config file>' under configs:, or change --nnodes / --nproc-per-node"});
  }
  const std::string marker = kConfigMarker;
  for (std::string& arg : args) {
    for (size_t at = arg.find(marker); at != std::string::npos;
         at = arg.find(marker, at + it->second.size())) {
      arg.replace(at, marker.size(), it->second);
    }
  }
  if (note != nullptr) {
    *note = OneLine("config " + it->second + " for " + std::to_string(world_size) + " cards (" +
                    options.job_configs_source + ")");
  }
  return args;
}

}  // namespace gculaunch
