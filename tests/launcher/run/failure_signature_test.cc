#include "launcher/run/failure_signature.h"

#include <catch2/catch.hpp>
#include <csignal>
#include <memory>
#include <string>
#include <vector>

namespace gculaunch {
namespace {

RankRecord Rec(int local_rank, std::optional<WorkerExit> exit, double exit_time, bool while_running,
               std::vector<std::string> tail = {}, int restart = 0) {
  RankRecord r;
  r.restart_count = restart;
  r.local_rank = local_rank;
  r.rank = 4 + local_rank;
  r.pid = 1000 + local_rank + 10 * restart;
  r.exit = exit;
  r.exit_time = exit_time;
  r.exited_while_running = while_running;
  r.stderr_tail = std::move(tail);
  return r;
}

const std::vector<std::string> kTraceback = {
    "Traceback (most recent call last):", "  File \"train.py\", line 3, in <module>",
    "    lr = cfg['lr']", "KeyError: 'lr'", "  "};

}  // namespace

TEST_CASE("failure signature: the last line that is not blank", "[failure_signature]") {
  CHECK(LastLine("") == "");
  CHECK(LastLine("\n  \n\t\n") == "");
  CHECK(LastLine("a\nKeyError: 'lr'\n\n") == "KeyError: 'lr'");
  CHECK(LastLine("  only line  ") == "only line");
  const std::string cut = LastLine(std::string(300, 'x'));
  CHECK(cut.size() == kMaxSignatureLine);
  // Never inside a UTF-8 character: 2-byte characters across the cut.
  std::string wide;
  while (wide.size() < 300) wide += "\xc3\xa9";
  const std::string cut_wide = LastLine(wide);
  CHECK(cut_wide.size() <= kMaxSignatureLine);
  CHECK(cut_wide.size() % 2 == 0);
}

TEST_CASE("failure signature: exit and line", "[failure_signature]") {
  CHECK(SignatureOf(WorkerExit::Exited(1), "KeyError: 'lr'") == "exit code 1: KeyError: 'lr'");
  CHECK(SignatureOf(WorkerExit::Signaled(SIGSEGV), "") == "signal 11 (SIGSEGV)");
}

TEST_CASE("failure signature: the first failing rank's stderr, without rank, pid or time",
          "[failure_signature]") {
  // Attempt 0: local rank 1 fails first; attempt 1: local rank 0 does, later, with another pid.
  const std::vector<RankRecord> records = {
      Rec(0, WorkerExit::Signaled(SIGTERM), 10.5, false, {}, 0),
      Rec(1, WorkerExit::Exited(1), 10.2, true, kTraceback, 0),
      Rec(0, WorkerExit::Exited(1), 20.7, true, kTraceback, 1),
      Rec(1, WorkerExit::Signaled(SIGTERM), 20.9, false, {}, 1),
  };
  const std::string expected = "exit code 1: KeyError: 'lr'";
  CHECK(AttemptSignature(records, 0, {}) == expected);
  CHECK(AttemptSignature(records, 1, {}) == expected);
  // A rank that only gculaunch stopped is no failure of its own.
  CHECK(AttemptSignature({Rec(0, WorkerExit::Signaled(SIGTERM), 1, false)}, 0, {}) == "");
  CHECK(AttemptSignature(records, 2, {}) == "");
  // A signal with nothing on stderr.
  CHECK(AttemptSignature({Rec(0, WorkerExit::Signaled(SIGSEGV), 1, true)}, 0, {}) ==
        "signal 11 (SIGSEGV)");
}

TEST_CASE("failure signature: the error file's message wins over stderr", "[failure_signature]") {
  const std::vector<RankRecord> records = {Rec(0, WorkerExit::Exited(1), 5, true, kTraceback)};
  AttemptErrorFiles files;
  files.text[0] = R"({"message": {"message": "ValueError: bad config\nsee above", "extraInfo": )"
                  R"({"py_callstack": "Traceback\nValueError: bad config\n", "timestamp": "1"}}})";
  files.mtime_ns[0] = 4'000'000'000;
  CHECK(AttemptSignature(records, 0, files) == "exit code 1: see above");
  files.text[0] = R"({"message": "", "timestamp": 1})";
  CHECK(AttemptSignature(records, 0, files) == "exit code 1: KeyError: 'lr'");
}

TEST_CASE("failure signature: error files as the records hold them, failed ranks only",
          "[failure_signature]") {
  std::vector<RankRecord> records = {
      Rec(0, WorkerExit::Exited(1), 5, true), Rec(1, WorkerExit::Exited(0), 5, true),
      Rec(2, WorkerExit::Exited(1), 5, true), Rec(3, WorkerExit::Exited(1), 5, true)};
  records[0].error_text = std::make_shared<const std::string>(R"({"message": "boom"})");
  records[0].error_file_mtime_ns = 7;
  records[1].error_text = std::make_shared<const std::string>(R"({"message": "fine"})");
  records[3].restart_count = 1;  // another attempt's
  records[3].error_text = std::make_shared<const std::string>(R"({"message": "old"})");
  // Rank 2 failed without a text: its file was missing or refused when it exited.
  const AttemptErrorFiles files = ReadAttemptErrorFiles(records, 0);
  CHECK(files.text.size() == 1);
  CHECK(files.text.at(0) == R"({"message": "boom"})");
  CHECK(files.mtime_ns.at(0) == 7);
}

}  // namespace gculaunch
