#include "tests/support/etcd_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

namespace gculaunch::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string FindEtcd() {
  for (const char* candidate : {"/usr/bin/etcd", "/usr/local/bin/etcd"}) {
    if (::access(candidate, X_OK) == 0) return candidate;
  }
  return "";
}

int ConnectLoopback(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  timeval timeout{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  return fd;
}

}  // namespace

std::uint16_t FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

EtcdServer::EtcdServer(Options options)
    : options_(std::move(options)), data_dir_(dir_.File("data")), binary_(FindEtcd()) {
  if (binary_.empty()) {
    FAIL("etcd is not installed (Debian's etcd-server): run scripts/bootstrap.sh as root");
  }
  client_port_ = FreeLoopbackPort();
  peer_port_ = FreeLoopbackPort();
  while (peer_port_ == client_port_) peer_port_ = FreeLoopbackPort();
  health_port_ = client_port_;
  if (!options_.cert_file.empty()) {
    health_port_ = FreeLoopbackPort();
    while (health_port_ == client_port_ || health_port_ == peer_port_) {
      health_port_ = FreeLoopbackPort();
    }
  }
  Start();
}

EtcdServer::~EtcdServer() { Stop(); }

std::string EtcdServer::endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }

std::string EtcdServer::url() const {
  return (options_.cert_file.empty() ? "http://" : "https://") + endpoint();
}

void EtcdServer::Start() {
  REQUIRE(pid_ < 0);
  const std::string client = url();
  const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
  std::vector<std::string> args = {binary_,
                                   "--name=test",
                                   "--data-dir=" + data_dir_,
                                   "--listen-client-urls=" + client,
                                   "--advertise-client-urls=" + client,
                                   "--listen-peer-urls=" + peer,
                                   "--initial-advertise-peer-urls=" + peer,
                                   "--initial-cluster=test=" + peer};
  if (options_.auth_token_ttl > 0) {
    args.push_back("--auth-token-ttl=" + std::to_string(options_.auth_token_ttl));
  }
  if (!options_.cert_file.empty()) {
    args.push_back("--cert-file=" + options_.cert_file);
    args.push_back("--key-file=" + options_.key_file);
    args.push_back("--listen-metrics-urls=http://127.0.0.1:" + std::to_string(health_port_));
  }
  if (!options_.trusted_ca_file.empty()) {
    args.push_back("--trusted-ca-file=" + options_.trusted_ca_file);
  }
  if (options_.client_cert_auth) args.push_back("--client-cert-auth");
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const std::string log = dir_.File("etcd.log");
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setpgid(0, 0);
    // A test binary that crashes (its destructors never run) must not leave etcd behind.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (out >= 0) {
      ::dup2(out, 1);
      ::dup2(out, 2);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  pid_ = pid;
  const auto deadline = Clock::now() + std::chrono::seconds(15);
  while (Clock::now() < deadline) {
    if (Healthy()) return;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      FAIL("etcd exited at start: " + ReadFile(log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  Stop();
  FAIL("etcd did not answer GET /health within 15 s: " + ReadFile(log));
}

bool EtcdServer::Healthy() const {
  const int fd = ConnectLoopback(health_port_);
  if (fd < 0) return false;
  const std::string request = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  bool ok = ::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size());
  std::string reply;
  char buf[1024];
  for (int i = 0; ok && i < 64; ++i) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    reply.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return reply.find("\"health\":\"true\"") != std::string::npos;
}

void EtcdServer::Stop() {
  if (pid_ < 0) return;
  ::kill(-pid_, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (Clock::now() >= deadline) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
}

}  // namespace gculaunch::testing
