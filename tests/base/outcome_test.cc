#include "base/outcome.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/text.h"

namespace gculaunch {
namespace {

TEST_CASE("outcome: every enumerator has its row, in order, with a unique name", "[outcome]") {
  std::set<std::string_view> names;
  size_t index = 0;
  for (const OutcomeRow& row : OutcomeTable()) {
    CHECK(static_cast<size_t>(row.outcome) == index);
    CHECK(&RowOf(row.outcome) == &row);
    CHECK(names.insert(row.name).second);
    CHECK(OutcomeNamed(row.name) == row.outcome);
    CHECK(!row.wording.empty());
    ++index;
  }
  CHECK(RowOf(Outcome::kNodeJoined).outcome == Outcome::kNodeJoined);  // the last enumerator
  CHECK_FALSE(OutcomeNamed("preempted").has_value());
}

TEST_CASE("outcome: the class codes are 0 and 80 to 83, rising with the verdict", "[outcome]") {
  CHECK(ExitClassCode(ExitClass::kSuccess) == 0);
  CHECK(ExitClassCode(ExitClass::kRetry) == 80);
  CHECK(ExitClassCode(ExitClass::kPreempted) == 81);
  CHECK(ExitClassCode(ExitClass::kReschedule) == 82);
  CHECK(ExitClassCode(ExitClass::kFatal) == 83);
  CHECK(SchemeExitCode(ExitScheme::kRank, Outcome::kRankFailed, 6) == 6);
  CHECK(SchemeExitCode(ExitScheme::kClasses, Outcome::kRankFailed, 6) == 80);
  CHECK(SchemeExitCode(ExitScheme::kClasses, Outcome::kHang, 6) == 80);
  CHECK(SchemeExitCode(ExitScheme::kClasses, Outcome::kUsage, 2) == 83);
  CHECK(SchemeExitCode(ExitScheme::kClasses, Outcome::kSignal, 143) == 81);
  CHECK(SchemeExitCode(ExitScheme::kClasses, Outcome::kNoResources, 7) == 82);
  CHECK(SchemeExitCode(ExitScheme::kClasses, Outcome::kSuccess, 0) == 0);
  CHECK(ExitSchemeNamed("classes") == ExitScheme::kClasses);
  CHECK(ExitSchemeNamed("rank") == ExitScheme::kRank);
  CHECK_FALSE(ExitSchemeNamed("class").has_value());
}

// README.md's outcome table: the rows after the marker comment, by outcome name:
// {rank-scheme cell, classes cell}.
std::map<std::string, std::pair<std::string, std::string>> ReadmeRows() {
  std::ifstream in(std::string(GCULAUNCH_SOURCE_DIR) + "/README.md");
  REQUIRE(in);
  std::map<std::string, std::pair<std::string, std::string>> rows;
  std::string line;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line.find("<!-- outcome table") != std::string::npos) {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    if (line.empty()) break;
    const std::vector<std::string> cells = Split(line, '|');
    if (cells.size() < 5 || cells[1].find('`') == std::string::npos) continue;  // head, rule
    std::string name = cells[1];
    std::erase_if(name, [](char c) { return c == '`' || c == ' '; });
    auto trim = [](std::string s) {
      s.erase(0, s.find_first_not_of(' '));
      s.erase(s.find_last_not_of(' ') + 1);
      return s;
    };
    rows[name] = {trim(cells[2]), trim(cells[3])};
  }
  return rows;
}

TEST_CASE("outcome: README's exit-code table says what the code's table says", "[outcome]") {
  const auto rows = ReadmeRows();
  size_t finals = 0;
  for (const OutcomeRow& row : OutcomeTable()) {
    if (!row.final) continue;
    ++finals;
    INFO("outcome " << row.name);
    auto it = rows.find(std::string(row.name));
    REQUIRE(it != rows.end());
    const auto& [rank_cell, class_cell] = it->second;
    if (row.rank_code >= 0) {
      CHECK(rank_cell == std::to_string(row.rank_code));
    } else {
      CHECK(rank_cell.find_first_not_of("0123456789") != std::string::npos);  // not one number
    }
    const std::string expected = std::string(ExitClassName(row.exit_class)) + " " +
                                 std::to_string(ExitClassCode(row.exit_class));
    CHECK(class_cell == expected);
  }
  CHECK(rows.size() == finals);  // no row in README that the code does not have
}

}  // namespace
}  // namespace gculaunch
