#include "launcher/ops/stack_dumper.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <thread>

#include "launcher/sys/proc_signals.h"
#include "tests/support/test_util.h"

extern char** environ;

namespace gculaunch {
namespace {

using testing::TempDir;

// A child this test starts, killed and reaped at the end.
class Child {
 public:
  explicit Child(const std::vector<std::string>& argv) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    REQUIRE(::posix_spawn(&pid_, args[0], nullptr, nullptr, args.data(), environ) == 0);
  }
  ~Child() {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  pid_t pid() const { return pid_; }
  // Alive and not a zombie.
  bool Running() const {
    int status = 0;
    return ::waitpid(pid_, &status, WNOHANG) == 0;
  }

 private:
  pid_t pid_ = -1;
};

// Waits (at most 20 s) until `pid` catches `sig`.
bool WaitCatches(pid_t pid, int sig) {
  for (int i = 0; i < 2000; ++i) {
    auto caught = sys::CatchesSignal(pid, sig);
    if (caught.ok() && *caught) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::vector<StackDump> RunDump(std::vector<StackTarget> targets) {
  boost::asio::io_context io;
  StackDumper dumper(io, StackDumper::Options{});
  std::vector<StackDump> result;
  bool called = false;
  dumper.Dump(std::move(targets), [&](std::vector<StackDump> dumps) {
    result = std::move(dumps);
    called = true;
  });
  io.run_for(std::chrono::seconds(10));
  REQUIRE(called);
  return result;
}

}  // namespace

TEST_CASE("stack dumper: a hooked process is dumped and keeps running, others are reported",
          "[stack_dumper]") {
  TempDir tmp;
  const int sig = SIGRTMIN + 10;
  const std::string file = tmp.path() + "/stacks.txt";
  const std::string script =
      "import faulthandler, time\n"
      "out = open('" +
      file +
      "', 'a')\n"
      "faulthandler.register(" +
      std::to_string(sig) +
      ", file=out, all_threads=True)\n"
      "def waiting_here():\n"
      "    time.sleep(60)\n"
      "waiting_here()\n";
  Child python({"/usr/bin/python3", "-c", script});
  Child sleeper({"/bin/sleep", "60"});
  REQUIRE(WaitCatches(python.pid(), sig));

  StackTarget hooked{0, 0, python.pid(), file, sig, ""};
  StackTarget unhooked{1, 1, sleeper.pid(), file, sig, ""};
  StackTarget no_file{2, 2, python.pid(), "", sig, ""};
  StackTarget gone{3, 3, -1, file, sig, "exited with code 1"};
  const auto dumps = RunDump({hooked, unhooked, no_file, gone});
  REQUIRE(dumps.size() == 4);
  CHECK(dumps[0].ok);
  CHECK(dumps[0].text.find("in waiting_here") != std::string::npos);
  CHECK(dumps[0].text.find("(most recent call first)") != std::string::npos);
  CHECK_FALSE(dumps[1].ok);
  CHECK(dumps[1].why == "the hook is not loaded: pid " + std::to_string(sleeper.pid()) +
                            " does not catch signal " + std::to_string(sig) +
                            " (not a Python rank started by gculaunch, python -S or -I, a "
                            "wrapper that does not exec Python, or still starting up); not "
                            "signalled");
  CHECK(dumps[2].why == "started without the stack-dump hook (run with --stack-dumps)");
  CHECK(dumps[3].why == "not running (exited with code 1)");
  // Neither was stopped: the dump does not kill, and the unhooked one was not signalled.
  CHECK(python.Running());
  CHECK(sleeper.Running());

  // A second dump reads only what was appended since.
  const auto again = RunDump({hooked});
  REQUIRE(again[0].ok);
  CHECK(again[0].text.rfind("Current thread", 0) == 0);
  CHECK(again[0].text.size() == dumps[0].text.size());
}

TEST_CASE("stack dumper: a dump is cut at kMaxDumpBytes, a linked file is not used",
          "[stack_dumper]") {
  TempDir tmp;
  const int sig = SIGRTMIN + 10;
  const std::string file = tmp.Write("stacks.txt");
  // A rank whose "dump" is 2 MiB: what it appends is kept up to 1 MiB, with a note.
  const std::string script =
      "import signal, time\n"
      "def dump(signum, frame):\n"
      "    with open('" +
      file +
      "', 'a') as out:\n"
      "        out.write('x' * (2 << 20))\n"
      "signal.signal(" +
      std::to_string(sig) +
      ", dump)\n"
      "time.sleep(60)\n";
  Child python({"/usr/bin/python3", "-c", script});
  REQUIRE(WaitCatches(python.pid(), sig));
  const auto dumps = RunDump({StackTarget{0, 0, python.pid(), file, sig, ""}});
  REQUIRE(dumps.size() == 1);
  REQUIRE(dumps[0].ok);
  const std::string note = "\n[gculaunch: the dump is cut at 1 MiB]\n";
  CHECK(dumps[0].text.size() == kMaxDumpBytes + note.size());
  CHECK(dumps[0].text.substr(kMaxDumpBytes) == note);

  // The hook's file replaced by a link (to a file that would grow): never signalled.
  const std::string link = tmp.File("linked.txt");
  std::filesystem::create_symlink(file, link);
  CHECK(FileSize(link) == -1);
  const auto linked = RunDump({StackTarget{0, 0, python.pid(), link, sig, ""}});
  CHECK_FALSE(linked[0].ok);
  CHECK(linked[0].why == "the hook's file " + link +
                             " is missing or not a regular file of the job's user; not signalled");
  CHECK(FileSize(file) == static_cast<long long>(2u << 20));  // no second dump was asked for
}

TEST_CASE("stack dumper: requests are served one after the other", "[stack_dumper]") {
  boost::asio::io_context io;
  StackDumper dumper(io, StackDumper::Options{});
  std::vector<int> order;
  StackTarget gone{0, 5, -1, "", 44, "not started"};
  dumper.Dump({gone}, [&](const std::vector<StackDump>& d) {
    order.push_back(1);
    CHECK(d.at(0).rank == 5);
    dumper.Dump({}, [&](const std::vector<StackDump>& e) {
      CHECK(e.empty());
      order.push_back(3);
    });
  });
  dumper.Dump({gone, gone}, [&](const std::vector<StackDump>& d) {
    CHECK(d.size() == 2);
    order.push_back(2);
  });
  io.run_for(std::chrono::seconds(5));
  CHECK(order == std::vector<int>{1, 2, 3});
}

}  // namespace gculaunch
