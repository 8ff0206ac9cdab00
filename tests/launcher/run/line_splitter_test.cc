#include "launcher/run/line_splitter.h"

#include <catch2/catch.hpp>

namespace gculaunch {

using Lines = std::vector<SplitLine>;

TEST_CASE("line splitter emits complete lines and carries the rest", "[line_splitter]") {
  CHECK(SplitAll({"a\nb\n"}) == Lines{{"a", LineEnd::kNewline}, {"b", LineEnd::kNewline}});
  CHECK(SplitAll({"ab", "c\nde", "f\n"}) ==
        Lines{{"abc", LineEnd::kNewline}, {"def", LineEnd::kNewline}});
  CHECK(SplitAll({"\n\n"}) == Lines{{"", LineEnd::kNewline}, {"", LineEnd::kNewline}});
  CHECK(SplitAll({}).empty());
  CHECK(SplitAll({""}).empty());
}

TEST_CASE("line splitter flushes a partial line at the end", "[line_splitter]") {
  CHECK(SplitAll({"a\npartial"}) ==
        Lines{{"a", LineEnd::kNewline}, {"partial", LineEnd::kFlushed}});
  LineSplitter splitter;
  Lines got;
  auto emit = [&](std::string_view t, LineEnd e) { got.push_back({std::string(t), e}); };
  splitter.Feed("x", emit);
  CHECK(splitter.has_partial());
  splitter.FlushPartial(emit);
  CHECK_FALSE(splitter.has_partial());
  splitter.FlushPartial(emit);  // nothing more
  CHECK(got == Lines{{"x", LineEnd::kFlushed}});
}

TEST_CASE("line splitter is independent of how bytes are chunked", "[line_splitter]") {
  const std::string text = "first line\nsecond\n\nthird one is longer\nlast";
  const Lines whole = SplitAll({text});
  for (size_t chunk = 1; chunk <= text.size(); ++chunk) {
    std::vector<std::string> chunks;
    for (size_t i = 0; i < text.size(); i += chunk) chunks.push_back(text.substr(i, chunk));
    INFO("chunk size " << chunk);
    CHECK(SplitAll(chunks) == whole);
  }
}

TEST_CASE("long lines are split in max_line pieces, nothing lost", "[line_splitter]") {
  // max_line 4: "abcdefghij" -> "abcd" split, "efgh" split, "ij" newline.
  CHECK(SplitAll({"abcdefghij\n"}, 4) ==
        Lines{{"abcd", LineEnd::kSplit}, {"efgh", LineEnd::kSplit}, {"ij", LineEnd::kNewline}});
  // Exactly max_line: one whole line, no empty piece.
  CHECK(SplitAll({"abcd\n"}, 4) == Lines{{"abcd", LineEnd::kNewline}});
  CHECK(SplitAll({"ab", "cd", "\n"}, 4) == Lines{{"abcd", LineEnd::kNewline}});
  CHECK(SplitAll({"abcdefgh\n"}, 4) ==
        Lines{{"abcd", LineEnd::kSplit}, {"efgh", LineEnd::kNewline}});
  // Byte by byte, the same pieces.
  std::vector<std::string> bytes;
  for (char c : std::string("abcdefghij\nxy")) bytes.push_back(std::string(1, c));
  CHECK(SplitAll(bytes, 4) == Lines{{"abcd", LineEnd::kSplit},
                                    {"efgh", LineEnd::kSplit},
                                    {"ij", LineEnd::kNewline},
                                    {"xy", LineEnd::kFlushed}});
  // The carry never exceeds max_line.
  LineSplitter splitter(4);
  size_t emitted = 0;
  splitter.Feed(std::string(1000, 'z'), [&](std::string_view t, LineEnd) { emitted += t.size(); });
  CHECK(splitter.partial_size() <= 4);
  CHECK(emitted + splitter.partial_size() == 1000);
}

TEST_CASE("VisibleText keeps what a terminal would show", "[line_splitter]") {
  CHECK(VisibleText("plain") == "plain");
  CHECK(VisibleText("crlf\r") == "crlf");
  CHECK(VisibleText(" 10%\r 20%\r 30%") == " 30%");
  CHECK(VisibleText("progress\r100%\r") == "100%");
  CHECK(VisibleText("\r") == "");
  CHECK(VisibleText("") == "");
}

TEST_CASE("LineTail keeps the last lines, oldest first", "[line_splitter]") {
  LineTail tail(3, 5);
  CHECK(tail.lines().empty());
  tail.Add("one");
  tail.Add("two");
  CHECK(tail.lines() == std::vector<std::string>{"one", "two"});
  tail.Add("three");
  tail.Add("four");
  tail.Add("fivesix");
  CHECK(tail.lines() == std::vector<std::string>{"three", "four", "fives"});
  LineTail none(0);
  none.Add("x");
  CHECK(none.lines().empty());
}

}  // namespace gculaunch
