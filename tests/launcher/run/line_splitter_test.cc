#include "launcher/run/line_splitter.h"

#include <catch2/catch.hpp>

namespace gculaunch {

using Lines = std::vector<SplitLine>;

TEST_CASE("line splitter emits complete lines and carries the rest", "[line_splitter]") {
  CHECK(SplitAllForTest({"a\nb\n"}) == Lines{{"a", LineEnd::kNewline}, {"b", LineEnd::kNewline}});
  CHECK(SplitAllForTest({"ab", "c\nde", "f\n"}) ==
        Lines{{"abc", LineEnd::kNewline}, {"def", LineEnd::kNewline}});
  CHECK(SplitAllForTest({"\n\n"}) == Lines{{"", LineEnd::kNewline}, {"", LineEnd::kNewline}});
  CHECK(SplitAllForTest({}).empty());
  CHECK(SplitAllForTest({""}).empty());
}

TEST_CASE("line splitter flushes a partial line at the end", "[line_splitter]") {
  CHECK(SplitAllForTest({"a\npartial"}) ==
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
  const Lines whole = SplitAllForTest({text});
  for (size_t chunk = 1; chunk <= text.size(); ++chunk) {
    std::vector<std::string> chunks;
    for (size_t i = 0; i < text.size(); i += chunk) chunks.push_back(text.substr(i, chunk));
    INFO("chunk size " << chunk);
    CHECK(SplitAllForTest(chunks) == whole);
  }
}

TEST_CASE("long lines are split in max_line pieces, nothing lost", "[line_splitter]") {
  // max_line 4: "abcdefghij" -> "abcd" split, "efgh" split, "ij" newline.
  CHECK(SplitAllForTest({"abcdefghij\n"}, 4) ==
        Lines{{"abcd", LineEnd::kSplit}, {"efgh", LineEnd::kSplit}, {"ij", LineEnd::kNewline}});
  // Exactly max_line: one whole line, no empty piece.
  CHECK(SplitAllForTest({"abcd\n"}, 4) == Lines{{"abcd", LineEnd::kNewline}});
  CHECK(SplitAllForTest({"ab", "cd", "\n"}, 4) == Lines{{"abcd", LineEnd::kNewline}});
  CHECK(SplitAllForTest({"abcdefgh\n"}, 4) ==
        Lines{{"abcd", LineEnd::kSplit}, {"efgh", LineEnd::kNewline}});
  // Byte by byte, the same pieces.
  std::vector<std::string> bytes;
  for (char c : std::string("abcdefghij\nxy")) bytes.push_back(std::string(1, c));
  CHECK(SplitAllForTest(bytes, 4) == Lines{{"abcd", LineEnd::kSplit},
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

TEST_CASE(
    "ProgressThrottle: a state at most once per interval, pending ones when due, the final "
    "one",
    "[line_splitter]") {
  using std::chrono::seconds;
  const ProgressThrottle::Clock::time_point t0{};  // the fake clock
  ProgressThrottle p(std::chrono::seconds(30));
  CHECK(p.due() == ProgressThrottle::Clock::time_point::max());
  CHECK(p.Offer(" 5%", t0));  // the first state shows at once
  CHECK_FALSE(p.Offer("10%", t0 + seconds(1)));
  CHECK_FALSE(p.Offer("15%", t0 + seconds(2)));
  CHECK(p.due() == t0 + seconds(30));  // the latest waits for the interval
  CHECK_FALSE(p.TakeDue("15%", t0 + seconds(29)));
  CHECK(p.TakeDue("15%", t0 + seconds(30)));
  CHECK(p.due() == ProgressThrottle::Clock::time_point::max());
  CHECK_FALSE(p.TakeDue("15%", t0 + seconds(90)));  // nothing pending
  CHECK_FALSE(p.Offer("15%", t0 + seconds(95)));    // the same state again: nothing new
  CHECK(p.Offer("20%", t0 + seconds(95)));          // the interval has passed
  CHECK(p.Final("100%"));                           // the line ends: its final state shows
  CHECK(p.due() == ProgressThrottle::Clock::time_point::max());
  // A bar whose final state was shown last is not shown twice.
  CHECK_FALSE(p.Offer("1/2", t0 + seconds(100)));  // within the interval of "20%"
  CHECK(p.TakeDue("2/2", t0 + seconds(125)));
  CHECK_FALSE(p.Final("2/2"));
  // An empty state (a bar cleared with "\r   \r") is not shown.
  ProgressThrottle fresh(std::chrono::seconds(30));
  CHECK_FALSE(fresh.Offer("", t0));
  CHECK_FALSE(fresh.Final(""));
  // Interval 0: every new state.
  ProgressThrottle every(std::chrono::milliseconds(0));
  for (int i = 0; i < 20; ++i) CHECK(every.Offer(std::to_string(i), t0 + seconds(i / 4)));
  CHECK_FALSE(every.Final("19"));
}

TEST_CASE("CompactProgress keeps only what the terminal shows, whatever follows",
          "[line_splitter]") {
  const std::vector<std::string> partials = {"epoch\r 1%\r 2%", "a\rb\r", "\rx\ry\r",
                                             "no cr",           "\r",     "x\r"};
  const std::vector<std::string> tails = {"", "\n", "z\n", "\r\n", "\rq\n", "w\rv"};
  for (const std::string& partial : partials) {
    for (const std::string& tail : tails) {
      LineSplitter plain, compact;
      auto none = [](std::string_view, LineEnd) {};
      plain.Feed(partial, none);
      compact.Feed(partial, none);
      compact.CompactProgress();
      CHECK(compact.partial_size() <= plain.partial_size());
      std::vector<std::string> a, b;
      plain.Feed(tail, [&](std::string_view t, LineEnd) { a.emplace_back(VisibleText(t)); });
      plain.FlushPartial([&](std::string_view t, LineEnd) { a.emplace_back(VisibleText(t)); });
      compact.Feed(tail, [&](std::string_view t, LineEnd) { b.emplace_back(VisibleText(t)); });
      compact.FlushPartial([&](std::string_view t, LineEnd) { b.emplace_back(VisibleText(t)); });
      INFO("partial " << partial << " tail " << tail);
      CHECK(a == b);
    }
  }
  // A bar that never ends its line stays small.
  LineSplitter bar(64);
  for (int i = 0; i < 1000; ++i) {
    bar.Feed("\r step " + std::to_string(i), [](std::string_view, LineEnd) { FAIL("no line"); });
    bar.CompactProgress();
  }
  CHECK(VisibleText(bar.partial()) == " step 999");
}

TEST_CASE("ContainsAnyOf: plain, case-sensitive substrings, and an empty filter is in every line",
          "[line_splitter]") {
  const std::vector<std::string> filters = {"loss", "a,b", "[x]"};
  CHECK(ContainsAnyOf("step 3 loss=0.1", filters));
  CHECK(ContainsAnyOf("x a,b y", filters));
  CHECK(ContainsAnyOf("not a regex [x]", filters));  // no pattern syntax
  CHECK_FALSE(ContainsAnyOf("LOSS=0.1", filters));
  CHECK_FALSE(ContainsAnyOf("x", filters));
  CHECK_FALSE(ContainsAnyOf("", filters));
  CHECK_FALSE(ContainsAnyOf("loss", {}));
  CHECK(ContainsAnyOf("", {""}));
  CHECK(ContainsAnyOf("anything", {"zzz", ""}));
}

}  // namespace gculaunch
