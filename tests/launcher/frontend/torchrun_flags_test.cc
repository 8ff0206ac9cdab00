// torchrun's newest flags: the values of --duplicate-stdout-filters /
// --duplicate-stderr-filters are read as torch reads them.
#include <catch2/catch.hpp>

#include "launcher/frontend/cli.h"
#include "launcher/frontend/cli_apply.h"

namespace gculaunch {
namespace {

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
