// The packaged documentation keeps up with the command line: every flag of
// `gculaunch --help` is in the man page, and every flag with a fixed set of
// values has its values in the bash completion.
#include <catch2/catch.hpp>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "launcher/frontend/cli.h"

namespace gculaunch {
namespace {

std::string ReadSource(const std::string& relative) {
  std::ifstream in(std::string(GCULAUNCH_SOURCE_DIR) + "/" + relative);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The options part of `gculaunch --help` (the examples after it show script
// arguments too).
std::string HelpText() {
  auto help = ParseCli({"--help"}, {});
  REQUIRE(help.ok());
  REQUIRE(help->action == CliAction::kHelp);
  const size_t examples = help->text.find("\nExamples:");
  REQUIRE(examples != std::string::npos);
  return help->text.substr(0, examples);
}

TEST_CASE("packaging: the man page describes every flag", "[packaging]") {
  const std::string help = HelpText();
  const std::string man = ReadSource("packaging/gculaunch.1");
  static const std::regex kFlag("--([a-z][a-z_-]*)");
  std::set<std::string> flags;
  for (auto it = std::sregex_iterator(help.begin(), help.end(), kFlag);
       it != std::sregex_iterator(); ++it) {
    // Each flag also has its '_' spelling; the man page shows the '-' one.
    if ((*it)[1].str().find('_') == std::string::npos) flags.insert((*it)[1].str());
  }
  CHECK(flags.size() >= 35);
  CHECK(flags.count("python-shim") == 1);
  CHECK(flags.count("cpu-affinity") == 1);
  CHECK(flags.count("job") == 1);
  for (const std::string& flag : flags) {
    std::string roff = "\\-\\-";
    for (char c : flag) roff += c == '-' ? std::string("\\-") : std::string(1, c);
    INFO("--" << flag << " (" << roff << ")");
    CHECK(man.find("\\fB" + roff + "\\fR") != std::string::npos);
  }
}

TEST_CASE("packaging: the bash completion knows the values of enumerated flags", "[packaging]") {
  const std::string help = HelpText();
  const std::string completion = ReadSource("packaging/gculaunch.bash-completion");
  // "--bind all|rank", "--cpu-affinity none|numa|spread", ...
  static const std::regex kEnumerated(
      "(--[a-z][a-z-]*)(?:,--[a-z_]+)* ([a-z0-9]+(?:\\|[a-z0-9]+)+)\\s");
  int seen = 0;
  for (auto it = std::sregex_iterator(help.begin(), help.end(), kEnumerated);
       it != std::sregex_iterator(); ++it) {
    const std::string flag = (*it)[1].str();
    if (flag == "--nproc-per-node" || flag == "--device") continue;  // open-ended values
    ++seen;
    INFO(flag);
    const bool listed = completion.find(flag + ")") != std::string::npos ||
                        completion.find(flag + "|") != std::string::npos;
    CHECK(listed);
    std::stringstream values((*it)[2].str());
    std::string value;
    while (std::getline(values, value, '|')) {
      INFO(value);
      CHECK(std::regex_search(completion, std::regex("compgen -W \"[^\"]*\\b" + value + "\\b")));
    }
  }
  CHECK(seen >= 5);  // bind, cpu-affinity, format, stdin, rdzv-backend
}

}  // namespace
}  // namespace gculaunch

namespace gculaunch {
namespace {

TEST_CASE("packaging: --exit-codes' help names every class with the code of the outcome table",
          "[packaging]") {
  std::string help = HelpText();
  // CLI11 wraps the text: compare with runs of white space as one space.
  help = std::regex_replace(help, std::regex("\\s+"), " ");
  const size_t at = help.find("--exit-codes");
  REQUIRE(at != std::string::npos);
  const std::string text = help.substr(at, 600);
  for (ExitClass c : {ExitClass::kSuccess, ExitClass::kRetry, ExitClass::kPreempted,
                      ExitClass::kReschedule, ExitClass::kFatal}) {
    const std::string named =
        std::to_string(ExitClassCode(c)) + " " + std::string(ExitClassName(c));
    INFO(named);
    CHECK(text.find(named) != std::string::npos);
  }
}

}  // namespace
}  // namespace gculaunch
