#include "launcher/run/exit_summary.h"

#include <catch2/catch.hpp>
#include <csignal>

namespace gculaunch {
namespace {

RankRecord Rec(int local_rank, std::optional<WorkerExit> exit, double exit_time, bool while_running,
               std::vector<std::string> tail = {}, int restart = 0) {
  RankRecord r;
  r.restart_count = restart;
  r.local_rank = local_rank;
  r.rank = local_rank;
  r.pid = 1000 + local_rank;
  r.exit = exit;
  r.exit_time = exit_time;
  r.exited_while_running = while_running;
  r.stderr_tail = std::move(tail);
  r.error_file = "/logs/run/attempt_" + std::to_string(restart) + "/" + std::to_string(local_rank) +
                 "/error.json";
  return r;
}

SummaryInput Failed(int code) {
  SummaryInput in;
  in.host = "node-a";
  in.exit_code = code;
  in.final_state.cause = StopCause::kRankFailed;
  in.child_watcher = "pidfd";
  return in;
}

bool HasLine(const std::vector<std::string>& lines, const std::string& needle) {
  for (const auto& l : lines) {
    if (l.find(needle) != std::string::npos) return true;
  }
  return false;
}

const char* kNested = R"({"message": {"message": "ValueError: boom",
  "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  File \"t.py\"\nValueError: boom\n",
                "timestamp": "100"}}})";

}  // namespace

TEST_CASE("error files: both forms parse", "[exit_summary]") {
  auto nested = ParseErrorFile(kNested);
  REQUIRE(nested.ok());
  CHECK(nested->nested);
  CHECK(nested->message == "ValueError: boom");
  CHECK(nested->py_callstack.find("Traceback") == 0);
  CHECK(nested->timestamp == 100);

  auto flat = ParseErrorFile(R"({"message": "native crash", "timestamp": 42.5})");
  REQUIRE(flat.ok());
  CHECK_FALSE(flat->nested);
  CHECK(flat->message == "native crash");
  CHECK(flat->timestamp == 42.5);

  auto no_time = ParseErrorFile(R"({"message": "x"})");
  REQUIRE(no_time.ok());
  CHECK(no_time->timestamp == 0);

  CHECK_FALSE(ParseErrorFile("not json").ok());
  CHECK_FALSE(ParseErrorFile("[1, 2]").ok());
  CHECK_FALSE(ParseErrorFile(R"({"msg": "x"})").ok());
  CHECK_FALSE(ParseErrorFile(R"({"message": 5})").ok());
  CHECK(ParseErrorFile("").error().what == "not valid JSON");
}

TEST_CASE("summary names the first failing rank and shows its stderr tail", "[exit_summary]") {
  SummaryInput in = Failed(1);
  in.records = {Rec(0, WorkerExit::Signaled(SIGTERM), 12.0, false),
                Rec(1, WorkerExit::Exited(1), 10.0, true,
                    {"Traceback (most recent call last):", "  File \"train.py\", line 3",
                     "ValueError: boom"}),
                Rec(2, WorkerExit::Exited(1), 11.0, false, {"peer went away"})};
  const ExitSummary s = BuildExitSummary(in);
  REQUIRE(s.root_cause.has_value());
  CHECK(s.root_cause->rank == 1);
  CHECK(s.root_cause->pid == 1001);
  CHECK(s.root_cause->message == "ValueError: boom");
  CHECK_FALSE(s.root_cause->from_error_file);
  CHECK(s.text.front() == "rank 1 failed (local rank 1, node 0 node-a, pid 1001): exit code 1");
  CHECK(HasLine(s.text, "last 3 line(s) of rank 1's stderr:"));
  CHECK(HasLine(s.text, "  | ValueError: boom"));
  CHECK(s.text.back() == "exit code 1 (rank_failed)");
  CHECK(s.json["outcome"] == "rank_failed");
  CHECK(s.json["root_cause"]["rank"] == 1);
  CHECK(s.json["root_cause"]["exit_code"] == 1);
  CHECK(s.json["root_cause"]["signal"].is_null());
  CHECK(s.json["ranks"].size() == 3);
  CHECK(s.json["ranks"][0]["signal"] == "SIGTERM");
  CHECK(s.json["ranks"][0]["exit_code"].is_null());  // one shape: the signal, and its shell code
  CHECK(s.json["ranks"][0]["shell_code"] == 143);
}

TEST_CASE("log output lost to a full disk is counted, whatever the outcome", "[exit_summary]") {
  SummaryInput in = Failed(1);
  in.records = {Rec(0, WorkerExit::Exited(1), 10.0, true, {"boom"})};
  CHECK(BuildExitSummary(in).json["log_bytes_dropped"] == 0);
  in.log_bytes_dropped = 123456;
  const ExitSummary failed = BuildExitSummary(in);
  CHECK(failed.json["log_bytes_dropped"] == 123456);
  CHECK(failed.text.front() ==
        "warning: 123456 bytes of rank output are missing from the log files (their file "
        "system was full)");
  CHECK(failed.text.back() == "exit code 1 (rank_failed)");
  in.exit_code = 0;
  in.records = {Rec(0, WorkerExit::Exited(0), 10.0, true)};
  const ExitSummary clean = BuildExitSummary(in);
  REQUIRE(clean.text.size() == 1);  // a success says nothing else
  CHECK(clean.text.front().find("123456 bytes") != std::string::npos);
}

TEST_CASE("an earlier error-file timestamp wins the root cause", "[exit_summary]") {
  SummaryInput in = Failed(1);
  // Rank 0 is reaped first (time 200) but rank 2's error file says it raised
  // at time 100: rank 2 is the root cause, as torchrun decides.
  in.records = {Rec(0, WorkerExit::Exited(1), 200.0, true, {"RuntimeError: peer closed"}),
                Rec(1, WorkerExit::Signaled(SIGTERM), 201.0, false),
                Rec(2, WorkerExit::Exited(1), 202.0, false, {"ValueError: boom"})};
  in.error_files[{0, 2}] = kNested;
  in.error_file_mtime_ns[{0, 2}] = 100'250'000'000;  // written at 100.25 s
  const ExitSummary s = BuildExitSummary(in);
  REQUIRE(s.root_cause.has_value());
  CHECK(s.root_cause->rank == 2);
  CHECK(s.root_cause->from_error_file);
  CHECK(s.root_cause->timestamp == 100);
  CHECK(HasLine(s.text, "error file /logs/run/attempt_0/2/error.json: ValueError: boom"));
  CHECK(HasLine(s.text, "traceback from the error file:"));
  CHECK(HasLine(s.text, "  |   File \"t.py\""));
  // Nested under another launcher: the file is forwarded with errorCode.
  REQUIRE(s.parent_error.has_value());
  CHECK((*s.parent_error)["message"]["message"] == "ValueError: boom");
  CHECK((*s.parent_error)["message"]["extraInfo"]["timestamp"] == "100");
  CHECK((*s.parent_error)["message"]["errorCode"] == 1);
}

TEST_CASE("same-second error files: the nanosecond mtimes decide", "[exit_summary]") {
  // torch 1.13's @record writes whole seconds: both files say 100.  Rank 1 raised first
  // (its file is older by 3 ms); rank 0's barrier failed because of it, and rank 0 was then
  // killed by gculaunch's SIGTERM (143), listed first.
  SummaryInput in = Failed(1);
  in.records = {Rec(0, WorkerExit::Signaled(SIGTERM), 100.9, false),
                Rec(1, WorkerExit::Exited(1), 100.5, true)};
  in.records[0].stop_signal_ns = 100'600'000'000;
  in.records[1].stop_signal_ns = 100'600'000'000;
  in.error_files[{0, 0}] = kNested;
  in.error_files[{0, 1}] = kNested;
  in.error_file_mtime_ns[{0, 0}] = 100'403'000'001;
  in.error_file_mtime_ns[{0, 1}] = 100'400'000'001;
  ExitSummary s = BuildExitSummary(in);
  REQUIRE(s.root_cause.has_value());
  CHECK(s.root_cause->rank == 1);
  CHECK(s.json["root_cause"]["rank"] == 1);
  CHECK(s.text.front().rfind("rank 1 failed", 0) == 0);

  // The same mtimes (one coarse clock tick): the one reaped first.
  in.error_file_mtime_ns[{0, 0}] = 100'400'000'001;
  s = BuildExitSummary(in);
  REQUIRE(s.root_cause.has_value());
  CHECK(s.root_cause->rank == 1);

  // Rank 0's file appeared after gculaunch's SIGTERM: never the root cause, even when it is
  // the only file left.
  in.error_file_mtime_ns[{0, 0}] = 100'700'000'000;
  in.error_files.erase({0, 1});
  s = BuildExitSummary(in);
  REQUIRE(s.root_cause.has_value());
  CHECK(s.root_cause->rank == 1);
  CHECK_FALSE(s.root_cause->from_error_file);
}

TEST_CASE("same-second error files without mtimes: the reap order decides", "[exit_summary]") {
  SummaryInput in = Failed(1);
  in.records = {Rec(0, WorkerExit::Exited(1), 100.31, true),
                Rec(1, WorkerExit::Exited(1), 100.3, true)};
  in.error_files[{0, 0}] = kNested;
  in.error_files[{0, 1}] = kNested;
  ExitSummary s = BuildExitSummary(in);
  REQUIRE(s.root_cause.has_value());
  CHECK(s.root_cause->rank == 1);
  std::swap(in.records[0].exit_time, in.records[1].exit_time);
  s = BuildExitSummary(in);
  REQUIRE(s.root_cause.has_value());
  CHECK(s.root_cause->rank == 0);
}

TEST_CASE("a flat error file and a signal death", "[exit_summary]") {
  SummaryInput in = Failed(128 + SIGSEGV);
  in.records = {Rec(0, WorkerExit::Signaled(SIGSEGV), 50.0, true)};
  const ExitSummary s = BuildExitSummary(in);
  REQUIRE(s.root_cause.has_value());
  CHECK(s.root_cause->message == "Signal 11 (SIGSEGV) received by PID 1000");
  CHECK(HasLine(s.text, "rank 0 wrote nothing to stderr"));
  CHECK(s.json["root_cause"]["signal"] == "SIGSEGV");
  // The parent's error file is synthesized in the nested form.
  REQUIRE(s.parent_error.has_value());
  CHECK((*s.parent_error)["message"]["message"] == "Signal 11 (SIGSEGV) received by PID 1000");
  CHECK((*s.parent_error)["message"]["extraInfo"]["timestamp"] == "50");
  CHECK((*s.parent_error)["message"]["errorCode"] == 139);

  in.error_files[{0, 0}] = R"({"message": "bad cuda", "timestamp": 40})";
  const ExitSummary flat = BuildExitSummary(in);
  CHECK(flat.root_cause->message == "bad cuda");
  CHECK(flat.root_cause->timestamp == 40);
  // A flat file is not forwarded as is: the nested form is built from it.
  CHECK((*flat.parent_error)["message"]["message"] == "bad cuda");
  CHECK((*flat.parent_error)["message"]["errorCode"] == 139);
}

TEST_CASE("only the last attempt counts", "[exit_summary]") {
  SummaryInput in = Failed(5);
  in.restarts = 1;
  in.max_restarts = 1;
  in.records = {Rec(0, WorkerExit::Exited(3), 1.0, true, {"first"}, 0),
                Rec(0, WorkerExit::Exited(5), 9.0, true, {"second"}, 1)};
  in.error_files[{0, 0}] = kNested;  // attempt 0's file: must not be used
  const ExitSummary s = BuildExitSummary(in);
  REQUIRE(s.root_cause.has_value());
  CHECK(s.root_cause->restart_count == 1);
  CHECK(s.root_cause->message == "second");
  CHECK(s.text.front().find("restart 1") != std::string::npos);
  CHECK(s.json["restarts"] == 1);
}

TEST_CASE("success: no text, no parent error, JSON says so", "[exit_summary]") {
  SummaryInput in;
  in.final_state.cause = StopCause::kSuccess;
  in.records = {Rec(0, WorkerExit::Exited(0), 1.0, true), Rec(1, WorkerExit::Exited(0), 1.0, true)};
  const ExitSummary s = BuildExitSummary(in);
  CHECK_FALSE(s.root_cause.has_value());
  CHECK(s.text.empty());
  CHECK_FALSE(s.parent_error.has_value());
  CHECK(s.json["outcome"] == "success");
  CHECK(s.json["exit_code"] == 0);
  CHECK(s.json["root_cause"].is_null());
  CHECK(s.json["ranks"][1]["state"] == "exited");
}

TEST_CASE("stopped by a signal", "[exit_summary]") {
  SummaryInput in;
  in.exit_code = 143;
  in.final_state.cause = StopCause::kSignal;
  in.final_state.stop_signal = SIGTERM;
  in.records = {Rec(0, WorkerExit::Exited(0), 1.0, false)};
  const ExitSummary s = BuildExitSummary(in);
  CHECK_FALSE(s.root_cause.has_value());
  CHECK(HasLine(s.text, "stopped by SIGTERM"));
  CHECK(s.json["signal"] == "SIGTERM");
  CHECK((*s.parent_error)["message"]["message"] == "gculaunch stopped by SIGTERM");
  CHECK((*s.parent_error)["message"]["errorCode"] == 143);
}

TEST_CASE("hints: libuv, a taken store port, stuck processes", "[exit_summary]") {
  SummaryInput in = Failed(1);
  in.records = {Rec(0, WorkerExit::Exited(1), 1.0, true,
                    {"RuntimeError: use_libuv was requested but PyTorch was build without libuv "
                     "support"})};
  CHECK(HasLine(BuildExitSummary(in).hints, "--no-agent-store"));

  in.records = {Rec(0, WorkerExit::Exited(1), 1.0, true,
                    {"RuntimeError: The server socket has failed to listen on any local network "
                     "address. The server socket has failed to bind to [::]:29511 (errno: 98 - "
                     "Address already in use)."})};
  in.rank0_hosts_store = true;
  in.master_port = "29511";
  in.master_port_given = true;
  auto s = BuildExitSummary(in);
  CHECK(HasLine(s.hints, "MASTER_PORT 29511 was already in use"));
  CHECK(HasLine(s.hints, "--master-port"));
  CHECK(HasLine(s.text, "hint: MASTER_PORT 29511"));
  in.master_port_given = false;
  CHECK(HasLine(BuildExitSummary(in).hints, "the port gculaunch picked (29511)"));
  in.rank0_hosts_store = false;  // gculaunch's own store: not rank 0's port
  CHECK(BuildExitSummary(in).hints.empty());

  SummaryInput stuck;
  stuck.exit_code = 5;
  stuck.final_state.cause = StopCause::kRankFailed;
  sys::ProcInfo info;
  info.pid = 77;
  info.pgid = 77;
  info.comm = "python3";
  info.state = 'D';
  info.wchan = "request_wait_answer";
  stuck.stuck = {info};
  stuck.records = {Rec(0, std::nullopt, 0, false)};
  auto st = BuildExitSummary(stuck);
  CHECK(st.json["outcome"] == "stuck");
  CHECK(st.json["stuck"][0]["wchan"] == "request_wait_answer");
  CHECK(st.json["ranks"][0]["state"] == "not_reaped");
  CHECK(HasLine(st.text,
                "stuck: pid 77 (python3) state D (disk sleep: uninterruptible), wchan "
                "request_wait_answer"));
  CHECK(HasLine(st.hints, "uninterruptible sleep"));
}

TEST_CASE("hints: a missing module names the interpreter and how it was chosen", "[exit_summary]") {
  SummaryInput in = Failed(1);
  in.records = {Rec(0, WorkerExit::Exited(1), 1.0, true,
                    {"Traceback (most recent call last):", "  File \"t.py\", line 1",
                     "ModuleNotFoundError: No module named 'torch'"})};
  in.python = "/usr/bin/python3";
  in.python_origin = "python3 on PATH";
  ExitSummary s = BuildExitSummary(in);
  CHECK(HasLine(s.text,
                "hint: rank 0 found no module named 'torch': it ran /usr/bin/python3 (the "
                "python3 found on PATH); install it for that interpreter, or pass --python PATH"));
  CHECK(HasLine(s.hints, "/usr/bin/python3"));

  in.python = "/opt/venv/bin/python";
  in.python_origin = "PYTHON_EXEC";
  s = BuildExitSummary(in);
  CHECK(HasLine(s.hints,
                "it ran /opt/venv/bin/python (chosen by PYTHON_EXEC); install it for "
                "that interpreter, or point PYTHON_EXEC (or --python) at one"));
  in.python_origin = "--python";
  s = BuildExitSummary(in);
  CHECK(HasLine(s.hints,
                "(chosen by --python); install it for that interpreter, or give "
                "--python an interpreter that has it"));

  // From an error file (@record) as well; nothing with --no-python.
  in.records[0].stderr_tail.clear();
  in.error_files[{0, 0}] =
      R"({"message": {"message": "ModuleNotFoundError: No module named 'apex.amp'"}})";
  s = BuildExitSummary(in);
  CHECK(HasLine(s.hints, "found no module named 'apex.amp'"));
  in.python.clear();
  in.python_origin.clear();
  CHECK_FALSE(HasLine(BuildExitSummary(in).hints, "no module"));
}

TEST_CASE("binary rank output does not break the JSON documents", "[exit_summary]") {
  SummaryInput in = Failed(1);
  in.records = {Rec(0, WorkerExit::Exited(1), 1.0, true, {std::string("bad \xff\xfe bytes")})};
  const ExitSummary s = BuildExitSummary(in);
  using nlohmann::json;
  const std::string text = s.json.dump(2, ' ', false, json::error_handler_t::replace);
  CHECK(text.find("bad ") != std::string::npos);
  CHECK_NOTHROW(s.parent_error->dump(-1, ' ', false, json::error_handler_t::replace));
}

TEST_CASE("a rank that could not be started", "[exit_summary]") {
  SummaryInput in;
  in.exit_code = 127;
  in.final_state.cause = StopCause::kSpawnFailed;
  in.start_error = Error{"cannot start '/x/prog': No such file or directory", "check the path"};
  in.start_error_local_rank = 3;
  const ExitSummary s = BuildExitSummary(in);
  CHECK(HasLine(s.text, "local rank 3 could not be started: cannot start '/x/prog'"));
  CHECK(s.json["outcome"] == "spawn_failed");
  CHECK((*s.parent_error)["message"]["message"] ==
        "gculaunch: cannot start '/x/prog': No such file or directory (fix: check the path)");
}

}  // namespace gculaunch

namespace gculaunch {

TEST_CASE("multi-node: a node whose ranks were only stopped names where it happened",
          "[exit_summary]") {
  SummaryInput in = Failed(7);
  in.final_state.cause = StopCause::kJob;
  in.records = {Rec(0, WorkerExit::Signaled(SIGTERM), 10, false)};
  in.job_outcome = Outcome::kRankFailed;
  in.job_cause =
      "the job stopped: rank 3 (local rank 1) on node 1 (hostb, 198.18.0.2) failed "
      "with exit code 7";
  in.job_json = {{"kind", "rank_failed"}, {"node", 1}, {"rank", 3}, {"exit_code", 7}};
  const ExitSummary s = BuildExitSummary(in);
  CHECK_FALSE(s.root_cause.has_value());  // no local rank failed
  CHECK(s.text == std::vector<std::string>{in.job_cause, "exit code 7 (rank_failed)"});
  CHECK(s.json["outcome"] == "rank_failed");
  CHECK(s.json["job"]["node"] == 1);
  REQUIRE(s.parent_error.has_value());
  CHECK((*s.parent_error)["message"]["message"] == in.job_cause);

  // A node that left on a signal keeps its own outcome; a single node has no "job".
  SummaryInput left = Failed(143);
  left.final_state.cause = StopCause::kSignal;
  left.final_state.stop_signal = SIGTERM;
  left.job_outcome = Outcome::kNodeLeft;
  CHECK(OutcomeOf(left) == Outcome::kSignal);
  CHECK(BuildExitSummary(Failed(3)).json["job"].is_null());
}

}  // namespace gculaunch

namespace gculaunch {

TEST_CASE("exit summary: --exit-codes classes exits with the class, the json keeps both codes",
          "[exit_summary]") {
  SummaryInput in = Failed(6);
  in.records = {Rec(0, WorkerExit::Exited(6), 50.0, true, {"boom"})};
  const ExitSummary rank = BuildExitSummary(in);
  CHECK(rank.exit_code == 6);
  CHECK(rank.outcome == Outcome::kRankFailed);
  CHECK(rank.json["exit_class"] == "retry");
  CHECK(rank.json["rank_exit_code"] == 6);
  in.exit_scheme = ExitScheme::kClasses;
  const ExitSummary classes = BuildExitSummary(in);
  CHECK(classes.exit_code == 80);
  CHECK(classes.json["exit_code"] == 80);
  CHECK(classes.json["rank_exit_code"] == 6);
  CHECK(classes.json["exit_scheme"] == "classes");
  CHECK(classes.text.back() ==
        "exit code 80 (rank_failed, class retry; the rank scheme's code is 6)");
}

TEST_CASE("exit summary: a spawn failure for lack of resources is no_resources, reschedule",
          "[exit_summary]") {
  SummaryInput in = Failed(7);
  in.final_state.cause = StopCause::kSpawnFailed;
  in.exit_scheme = ExitScheme::kClasses;
  const ExitSummary s = BuildExitSummary(in);
  CHECK(s.outcome == Outcome::kNoResources);
  CHECK(s.exit_code == 82);
}

TEST_CASE("exit summary: the termination message puts the cause first and fits 4096 bytes",
          "[exit_summary]") {
  SummaryInput in = Failed(1);
  std::vector<std::string> tail;
  for (int i = 0; i < 400; ++i) tail.push_back("line " + std::to_string(i) + std::string(40, 'x'));
  tail.push_back("ValueError: boom");
  in.records = {Rec(1, WorkerExit::Exited(1), 50.0, true, tail, 2)};
  in.restarts = 2;
  const ExitSummary s = BuildExitSummary(in);
  const std::string& m = s.termination_message;
  CHECK(m.size() <= kTerminationMessageMax);
  CHECK(m.rfind("gculaunch: exit 1 (retry): rank_failed: ", 0) == 0);
  CHECK(m.find("rank 1 (local rank 1) on node 0 node-a, attempt 2: exit code 1\n") !=
        std::string::npos);
  CHECK(m.find("\nValueError: boom\n") != std::string::npos);
  CHECK(m.find("line 399") != std::string::npos);  // the last lines are kept, the first not
  CHECK(m.find("line 0x") == std::string::npos);
  CHECK(m.ends_with("ValueError: boom\n"));

  SummaryInput ok = Failed(0);
  ok.final_state.cause = StopCause::kSuccess;
  CHECK(BuildExitSummary(ok).termination_message ==
        "gculaunch: exit 0 (success): success: every rank exited 0\n");
}

TEST_CASE("exit summary: a termination message cuts a line too long for it", "[exit_summary]") {
  const std::string m =
      FitTerminationMessage({"first", std::string(10000, 'y'), "lost"}, "t", {"tail"}, 100);
  CHECK(m.size() == 100);
  CHECK(m.rfind("first\nyyy", 0) == 0);
  CHECK(m.find("lost") == std::string::npos);
  CHECK(EarlyTerminationMessage(Outcome::kUsage, 83, "gculaunch: --bad: unknown") ==
        "gculaunch: exit 83 (fatal): usage: usage or configuration error (a bad flag, variable, "
        "file or device)\ngculaunch: --bad: unknown\n");
}

TEST_CASE("exit summary: one shape for a rank's exit", "[exit_summary]") {
  CHECK(RankExitJson(WorkerExit::Exited(3)) ==
        nlohmann::json{{"exit_code", 3}, {"signal", nullptr}, {"shell_code", 3}});
  CHECK(RankExitJson(WorkerExit::Signaled(SIGKILL)) ==
        nlohmann::json{{"exit_code", nullptr}, {"signal", "SIGKILL"}, {"shell_code", 137}});
  CHECK(RankExitJson(std::nullopt) ==
        nlohmann::json{{"exit_code", nullptr}, {"signal", nullptr}, {"shell_code", nullptr}});
}

}  // namespace gculaunch
