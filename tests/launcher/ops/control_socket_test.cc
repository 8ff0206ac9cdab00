#include "launcher/ops/control_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <thread>

#include "tests/support/test_util.h"

namespace gculaunch {
namespace {

constexpr uid_t kNobody = 65534;

// Serves `io` while `client` runs in a thread (the socket is answered on the test's thread).
void WhileServing(boost::asio::io_context& io, const std::function<void()>& client) {
  std::atomic<bool> done{false};
  std::thread thread([&] {
    client();
    done = true;
  });
  for (int i = 0; i < 1000 && !done; ++i) io.run_for(std::chrono::milliseconds(10));
  thread.join();
}

// A socket file nobody listens on: bound, then closed without removing the file.
void MakeStaleSocket(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  ::close(fd);
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace

TEST_CASE("control socket: the directory is XDG_RUNTIME_DIR's when it is ours, else /tmp's",
          "[control_socket]") {
  testing::TempDir tmp;
  const uid_t me = ::geteuid();
  CHECK(ControlDirPath(tmp.path(), me) == tmp.path() + "/gculaunch");
  CHECK(ControlDirPath(tmp.path() + "/", me) == tmp.path() + "/gculaunch");
  CHECK(ControlDirPath("", me) == "/tmp/gculaunch-" + std::to_string(me));
  CHECK(ControlDirPath("relative/dir", me) == "/tmp/gculaunch-" + std::to_string(me));
  CHECK(ControlDirPath(tmp.File("missing"), me) == "/tmp/gculaunch-" + std::to_string(me));
  // Not ours: /tmp's.
  CHECK(ControlDirPath(tmp.path(), me + 1) == "/tmp/gculaunch-" + std::to_string(me + 1));
  // Writable by others: /tmp's.
  std::filesystem::permissions(tmp.path(), std::filesystem::perms::all);
  CHECK(ControlDirPath(tmp.path(), me) == "/tmp/gculaunch-" + std::to_string(me));
}

TEST_CASE("control socket: the directory is created 0700 and checked with lstat",
          "[control_socket]") {
  testing::TempDir tmp;
  const std::string dir = tmp.File("ctl");
  // Missing and not to be created.
  auto missing = CheckControlDir(dir, false);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().what.find(dir) != std::string::npos);

  REQUIRE(CheckControlDir(dir, true).ok());
  struct stat st {};
  REQUIRE(::lstat(dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  CHECK(CheckControlDir(dir, true).ok());  // again: it exists

  SECTION("another mode") {
    REQUIRE(::chmod(dir.c_str(), 0755) == 0);
    auto bad = CheckControlDir(dir, true);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().what == "the control directory " + dir + " has mode 0755, not 0700");
    CHECK(bad.error().hint == "chmod 700 " + dir);
  }
  SECTION("a symbolic link to a good directory") {
    const std::string link = tmp.File("link");
    REQUIRE(::symlink(dir.c_str(), link.c_str()) == 0);
    auto bad = CheckControlDir(link, true);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().what ==
          "the control directory " + link + " is a symbolic link, not a directory");
    CHECK(bad.error().hint.find("rm -rf " + link) != std::string::npos);
  }
  SECTION("a file") {
    const std::string file = tmp.Write("file", "x");
    auto bad = CheckControlDir(file, true);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().what == "the control directory " + file + " is not a directory");
  }
  SECTION("another user's") {
    // The tests run as root (the integration tests need it); chown must work.
    REQUIRE(::geteuid() == 0);
    REQUIRE(::chown(dir.c_str(), kNobody, kNobody) == 0);
    auto bad = CheckControlDir(dir, true);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().what ==
          "the control directory " + dir + " belongs to uid 65534, not to this user (uid 0)");
    // Not "rm -rf": in sticky /tmp this user could not do it.
    CHECK(bad.error().hint ==
          "ask root to remove it, or set XDG_RUNTIME_DIR to a directory of yours");
    CHECK(ControlDirOfAnotherUser(dir));
  }
}

TEST_CASE("control socket: private directories when the usual one is another user's",
          "[control_socket]") {
  REQUIRE(::geteuid() == 0);  // chown below
  testing::TempDir tmp;
  const uid_t me = ::geteuid();
  const std::string prefix = tmp.path() + "/gculaunch-" + std::to_string(me) + "-";
  auto made = MakePrivateControlDir(tmp.path(), me);
  REQUIRE(made.ok());
  CHECK(made->rfind(prefix, 0) == 0);
  CHECK(made->size() == prefix.size() + 6);
  struct stat st {};
  REQUIRE(::lstat(made->c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  CHECK(CheckControlDir(*made, false).ok());
  CHECK_FALSE(ControlDirOfAnotherUser(*made));
  CHECK_FALSE(ControlDirOfAnotherUser(tmp.File("missing")));
  // Planted look-alikes are not listed: another user's 0700 directory, a symlink to ours, an
  // open directory of ours, a file, and another uid's name.
  const std::string squatted = prefix + "squat";
  REQUIRE(::mkdir(squatted.c_str(), 0700) == 0);
  REQUIRE(::chown(squatted.c_str(), kNobody, kNobody) == 0);
  REQUIRE(::symlink(made->c_str(), (prefix + "link").c_str()) == 0);
  REQUIRE(::mkdir((prefix + "open").c_str(), 0755) == 0);
  tmp.Write("gculaunch-" + std::to_string(me) + "-file", "x");
  REQUIRE(::mkdir((tmp.path() + "/gculaunch-" + std::to_string(me + 1) + "-abcdef").c_str(),
                  0700) == 0);
  CHECK(PrivateControlDirs(tmp.path(), me) == std::vector<std::string>{*made});
  CHECK(PrivateControlDirs(tmp.File("missing"), me).empty());
}

TEST_CASE("control socket: a client finds a launch in a private directory past a squatted one",
          "[control_socket]") {
  REQUIRE(::geteuid() == 0);  // chown below
  testing::TempDir tmp;
  const std::string xdg = tmp.File("xdg");
  REQUIRE(::mkdir(xdg.c_str(), 0700) == 0);
  const std::string squatted = xdg + "/gculaunch";
  REQUIRE(::mkdir(squatted.c_str(), 0777) == 0);
  REQUIRE(::chown(squatted.c_str(), kNobody, kNobody) == 0);
  auto own = MakePrivateControlDir(tmp.path(), ::geteuid());
  REQUIRE(own.ok());
  boost::asio::io_context io;
  const std::string path = *own + "/" + ControlSocketFileName("sq", 0, ::getpid());
  auto control = ControlSocket::Listen(io, path);
  REQUIRE(control.ok());
  auto found = FindControlEndpoint(xdg, {"sq", -1, 0}, tmp.path());
  REQUIRE(found.ok());
  CHECK(found->path == path);
}

TEST_CASE("control socket: names and the sun_path limit", "[control_socket]") {
  CHECK(ControlSocketFileName("job-1", 0, 4242) == "job-1-n0-4242.sock");
  CHECK(ControlSocketFileName("a/b c\n", 3, 7) == "a_b_c_-n3-7.sock");
  CHECK(ControlSocketFileName(std::string(60, 'x'), 1, 2) == std::string(40, 'x') + "-n1-2.sock");

  auto e = ParseControlSocketName("/d", "my-run-n12-n3-4242.sock");
  REQUIRE(e);
  CHECK(e->path == "/d/my-run-n12-n3-4242.sock");
  CHECK(e->run_id == "my-run-n12");
  CHECK(e->node_rank == 3);
  CHECK(e->pid == 4242);
  for (const char* bad : {"x.sock", "-n0-1.sock", "run-n0-1.sockx", "run-nx-1.sock", "run-n0-.sock",
                          "run-n0-1", "run-0-1.sock", ".sock"}) {
    INFO(bad);
    CHECK_FALSE(ParseControlSocketName("/d", bad));
  }

  CHECK(CheckSocketPathLength("/" + std::string(106, 'a')).ok());  // 107 bytes
  auto long_path = CheckSocketPathLength("/" + std::string(107, 'a'));
  REQUIRE_FALSE(long_path.ok());
  CHECK(long_path.error().what.find("is 108 bytes, longer than a Unix socket allows (107)") !=
        std::string::npos);
  boost::asio::io_context io;
  auto refused = ControlSocket::Listen(io, "/tmp/" + std::string(110, 'b'));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().hint.find("XDG_RUNTIME_DIR") != std::string::npos);
}

TEST_CASE("control socket: registered commands are answered, the file goes with the socket",
          "[control_socket]") {
  testing::TempDir tmp;
  boost::asio::io_context io;
  const std::string path = tmp.File(ControlSocketFileName("run", 0, ::getpid()));
  auto socket = ControlSocket::Listen(io, path);
  REQUIRE(socket.ok());
  std::vector<std::vector<std::string>> calls;
  (*socket)->Register("echo",
                      [&](const std::vector<std::string>& args, const ControlSocket::Reply& reply) {
                        calls.push_back(args);
                        std::string text = "echo";
                        for (const std::string& a : args) text += " " + a;
                        reply(text + "\n");
                      });
  (*socket)->Register("stacks", [](const std::vector<std::string>&,
                                   const ControlSocket::Reply& reply) { reply("s\n"); });
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));

  std::vector<Result<std::string>> answers;
  std::vector<ControlEndpoint> listed;
  WhileServing(io, [&] {
    for (const char* line : {"echo a  b", "echo", "stacks\r", "nope x"}) {
      answers.push_back(ControlRequest(path, line, std::chrono::seconds(5)));
    }
    listed = ListControlEndpoints(tmp.path());
  });
  REQUIRE(answers.size() == 4);
  for (const auto& a : answers) REQUIRE(a.ok());
  CHECK(*answers[0] == "echo a b\n");
  CHECK(*answers[1] == "echo\n");
  CHECK(*answers[2] == "s\n");
  CHECK(*answers[3] == "error: unknown command 'nope' (known: echo, stacks)\n");
  CHECK(calls == std::vector<std::vector<std::string>>{{"a", "b"}, {}});
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].path == path);
  CHECK(listed[0].pid == ::getpid());

  (*socket)->Stop();
  CHECK_FALSE(Exists(path));
  auto gone = ControlRequest(path, "echo", std::chrono::seconds(1));
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.error().what.find("cannot reach the gculaunch at " + path) != std::string::npos);
}

TEST_CASE("control socket: a stale socket is skipped and removed, a live one kept",
          "[control_socket]") {
  testing::TempDir tmp;
  boost::asio::io_context io;
  const std::string stale = tmp.File(ControlSocketFileName("old", 0, 999999));
  MakeStaleSocket(stale);
  tmp.Write("notes.txt", "not a socket");
  const std::string live = tmp.File(ControlSocketFileName("new", 1, ::getpid()));
  auto socket = ControlSocket::Listen(io, live);
  REQUIRE(socket.ok());
  std::vector<ControlEndpoint> listed;
  WhileServing(io, [&] { listed = ListControlEndpoints(tmp.path()); });
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].run_id == "new");
  CHECK(listed[0].node_rank == 1);
  CHECK_FALSE(Exists(stale));
  CHECK(Exists(tmp.File("notes.txt")));
  // A stale file with the name of a new socket is replaced.
  (*socket)->Stop();
  MakeStaleSocket(live);
  auto again = ControlSocket::Listen(io, live);
  CHECK(again.ok());
}

TEST_CASE("control socket: selecting a launch", "[control_socket]") {
  const std::vector<ControlEndpoint> all = {
      {"/d/a-n0-999911.sock", "a", 0, 999911},
      {"/d/a-n1-999912.sock", "a", 1, 999912},
      {"/d/b_c-n0-999913.sock", "b_c", 0, 999913},
  };
  auto none = SelectControlEndpoint({}, {});
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().what == "no running gculaunch job of this user was found");
  auto one = SelectControlEndpoint({all[2]}, {});
  REQUIRE(one.ok());
  CHECK(one->pid == 999913);
  // No such processes: none is in this network namespace, so several stay ambiguous.
  auto several = SelectControlEndpoint(all, {});
  REQUIRE_FALSE(several.ok());
  CHECK(
      several.error().what ==
      "3 gculaunch jobs run here: run a node 0 pid 999911; run a node 1 pid 999912; run b_c node 0 "
      "pid 999913");
  CHECK(several.error().hint == "choose one with --job RUN_ID, --node N or --pid PID");
  CHECK(SelectControlEndpoint(all, {"b c", -1, 0})->pid == 999913);  // made safe like the name
  CHECK(SelectControlEndpoint(all, {"a", 1, 0})->pid == 999912);
  CHECK(SelectControlEndpoint(all, {"", -1, 999911})->pid == 999911);
  CHECK_FALSE(SelectControlEndpoint(all, {"a", -1, 0}).ok());
  auto unmatched = SelectControlEndpoint(all, {"zzz", -1, 0});
  REQUIRE_FALSE(unmatched.ok());
  CHECK(unmatched.error().what == "no running gculaunch job matches --job/--node/--pid");
}

}  // namespace gculaunch
