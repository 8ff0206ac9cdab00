// torchrun's newest flags: every option string of torch 2.11's parser (the list in
// tests/data/torchrun_2_11_flags.txt; CI has no torch 2.11) is accepted, and the values of
// --duplicate-stdout-filters / --duplicate-stderr-filters are read as torch reads them.
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <sstream>

#include "launcher/frontend/cli.h"
#include "launcher/frontend/cli_apply.h"

namespace gculaunch {
namespace {

struct TorchArgument {
  std::vector<std::string> strings;  ///< "--nproc-per-node", "--nproc_per_node"
  bool takes_value = false;
  std::string dest;  ///< argparse's: the first long string, '-' as '_' ("nproc_per_node")
};

std::vector<TorchArgument> ReadFlagList(const std::string& relative) {
  std::ifstream in(std::string(GCULAUNCH_SOURCE_DIR) + "/" + relative);
  REQUIRE(in);
  std::vector<TorchArgument> arguments;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::vector<std::string> tokens;
    for (std::string word; words >> word;) tokens.push_back(word);
    REQUIRE(tokens.size() >= 2);
    TorchArgument argument;
    REQUIRE((tokens.back() == "value" || tokens.back() == "switch"));
    argument.takes_value = tokens.back() == "value";
    argument.strings.assign(tokens.begin(), tokens.end() - 1);
    for (const std::string& s : argument.strings) {
      if (s.rfind("--", 0) != 0 || !argument.dest.empty()) continue;
      argument.dest = s.substr(2);
      std::replace(argument.dest.begin(), argument.dest.end(), '-', '_');
    }
    arguments.push_back(std::move(argument));
  }
  return arguments;
}

// A value for each value argument of torch's parser, by argparse dest.
const std::map<std::string, std::string>& Samples() {
  static const std::map<std::string, std::string> samples = {
      {"nnodes", "1"},
      {"nproc_per_node", "2"},
      {"rdzv_backend", "c10d"},
      {"rdzv_endpoint", "127.0.0.1:29511"},
      {"rdzv_id", "job"},
      {"rdzv_conf", "join_timeout=900"},
      {"max_restarts", "1"},
      {"monitor_interval", "0.5"},
      {"start_method", "fork"},
      {"event_log_handler", "console"},
      {"role", "trainer"},
      {"log_dir", "logs"},
      {"redirects", "3"},
      {"tee", "1"},
      {"local_ranks_filter", "0"},
      {"duplicate_stdout_filters", "loss,acc"},
      {"duplicate_stderr_filters", "WARN"},
      {"node_rank", "0"},
      {"master_addr", "127.0.0.2"},
      {"master_port", "29512"},
      {"local_addr", "127.0.0.1"},
      {"logs_specs", "default"},
      {"numa_binding", "node"},
      {"signals_to_handle", "SIGTERM,SIGINT"},
      {"shutdown_timeout", "30"},
  };
  return samples;
}

TEST_CASE("torchrun flags: every option string of torch 2.11's parser is accepted",
          "[cli][torchrun]") {
  const std::vector<TorchArgument> arguments = ReadFlagList("tests/data/torchrun_2_11_flags.txt");
  // 30 arguments in torch 2.11; a shorter list means the file lost lines.
  REQUIRE(arguments.size() >= 30);
  int accepted = 0;
  for (const TorchArgument& argument : arguments) {
    std::string value;
    if (argument.takes_value) {
      auto sample = Samples().find(argument.dest);
      if (sample == Samples().end()) FAIL("no sample value for --" << argument.dest << ": add one");
      value = sample->second;
    }
    for (const std::string& flag : argument.strings) {
      INFO(flag);
      std::vector<std::string> args = {flag};
      if (argument.takes_value) args.push_back(value);
      args.push_back("x.py");
      auto parsed = ParseCli(args, EnvMap{});
      if (!parsed.ok()) FAIL(parsed.error().Format());
      CHECK(parsed->action == CliAction::kLaunch);
      CHECK(parsed->options.script == "x.py");
      CHECK(parsed->options.script_args.empty());
      ++accepted;
    }
  }
  CHECK(accepted >= 55);
}

TEST_CASE("torchrun flags: the duplicate filters are torch's comma-separated list",
          "[cli][torchrun]") {
  using cli_flags::SplitCommaList;
  using List = std::vector<std::string>;
  CHECK(SplitCommaList("loss") == List{"loss"});
  CHECK(SplitCommaList("loss,acc") == List{"loss", "acc"});
  // ",," is a literal comma, read left to right.
  CHECK(SplitCommaList("a,,b,c") == List{"a,b", "c"});
  CHECK(SplitCommaList(",,") == List{","});
  CHECK(SplitCommaList("a,,,b") == List{"a,", "b"});
  CHECK(SplitCommaList("a,,,,b") == List{"a,,b"});
  // Empty items stay (torch keeps them; an empty filter matches every line).
  CHECK(SplitCommaList("loss,") == List{"loss", ""});
  CHECK(SplitCommaList(",loss") == List{"", "loss"});
  CHECK(SplitCommaList(",") == List{"", ""});
  // Spaces and case are kept: filters are plain substrings.
  CHECK(SplitCommaList(" Loss ,acc") == List{" Loss ", "acc"});
}

TEST_CASE("torchrun flags: the duplicate filters in every spelling and from PET_",
          "[cli][torchrun]") {
  using List = std::vector<std::string>;
  for (const char* flag : {"--duplicate-stdout-filters", "--duplicate_stdout_filters"}) {
    INFO(flag);
    auto spaced = ParseCli({flag, "loss,,x,acc", "x.py"}, EnvMap{});
    REQUIRE(spaced.ok());
    CHECK(spaced->options.duplicate_stdout_filters == List{"loss,x", "acc"});
    CHECK_FALSE(spaced->options.duplicate_stderr_filters.has_value());
    auto joined = ParseCli({flag + std::string("=loss"), "x.py"}, EnvMap{});
    REQUIRE(joined.ok());
    CHECK(joined->options.duplicate_stdout_filters == List{"loss"});
  }
  for (const char* flag : {"--duplicate-stderr-filters", "--duplicate_stderr_filters"}) {
    INFO(flag);
    auto parsed = ParseCli({flag, "WARN,Error", "x.py"}, EnvMap{});
    REQUIRE(parsed.ok());
    CHECK(parsed->options.duplicate_stderr_filters == List{"WARN", "Error"});
    CHECK_FALSE(parsed->options.duplicate_stdout_filters.has_value());
  }
  auto pet = ParseCli({"x.py"}, EnvMap{{"PET_DUPLICATE_STDOUT_FILTERS", "a,,b"},
                                       {"PET_DUPLICATE_STDERR_FILTERS", "WARN"}});
  REQUIRE(pet.ok());
  CHECK(pet->options.duplicate_stdout_filters == List{"a,b"});
  CHECK(pet->options.duplicate_stderr_filters == List{"WARN"});
  CHECK(pet->options.Source("duplicate-stdout-filters") == "PET_DUPLICATE_STDOUT_FILTERS");
  // The command line wins over PET_.
  auto both = ParseCli({"--duplicate-stdout-filters", "cli", "x.py"},
                       EnvMap{{"PET_DUPLICATE_STDOUT_FILTERS", "env"}});
  REQUIRE(both.ok());
  CHECK(both->options.duplicate_stdout_filters == List{"cli"});
  // An empty PET_ is unset, as for every flag.
  auto empty_pet = ParseCli({"x.py"}, EnvMap{{"PET_DUPLICATE_STDOUT_FILTERS", ""}});
  REQUIRE(empty_pet.ok());
  CHECK_FALSE(empty_pet->options.duplicate_stdout_filters.has_value());
  // An empty value on the command line is refused, as for every value flag.
  auto empty = ParseCli({"--duplicate-stdout-filters", "", "x.py"}, EnvMap{});
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().Format() ==
        "gculaunch: --duplicate-stdout-filters '': expected TEXT,... (fix: give a value or drop "
        "--duplicate-stdout-filters)");
  // argparse abbreviations of the new flags resolve, and "--duplicate" names both.
  auto abbreviated = ParseCli({"--duplicate-stdo", "x", "--duplicate_stde=y", "x.py"}, EnvMap{});
  REQUIRE(abbreviated.ok());
  CHECK(abbreviated->options.duplicate_stdout_filters == List{"x"});
  CHECK(abbreviated->options.duplicate_stderr_filters == List{"y"});
  auto ambiguous = ParseCli({"--duplicate", "x", "x.py"}, EnvMap{});
  REQUIRE_FALSE(ambiguous.ok());
  CHECK(ambiguous.error().Format() ==
        "gculaunch: ambiguous flag '--duplicate': it could be --duplicate-stdout-filters, "
        "--duplicate-stderr-filters (fix: write the whole flag name)");
}

}  // namespace
}  // namespace gculaunch
