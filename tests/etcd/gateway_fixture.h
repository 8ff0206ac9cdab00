// Helpers shared by the etcd client's tests (client_test.cc, auth_test.cc, tls_test.cc):
// run one coroutine to completion, sleep inside one, and a blocking POST to etcd's gateway on
// loopback for setting up users and roles before the client under test starts.
//
// Thread safety: the test's thread only.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>

namespace gculaunch::etcd::gateway_test {

/// Runs one coroutine (given the io_context's executor) to completion; a 40 s guard fails a
/// hang, an exception inside it is rethrown here.
inline void Run(
    const std::function<boost::asio::awaitable<void>(boost::asio::any_io_executor)>& body) {
  boost::asio::io_context io;
  bool finished = false;
  std::exception_ptr error;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        co_await body(io.get_executor());
        finished = true;
      },
      [&](std::exception_ptr e) { error = std::move(e); });
  io.run_for(std::chrono::seconds(40));
  if (error) std::rethrow_exception(error);
  REQUIRE(finished);
}

inline boost::asio::awaitable<void> Sleep(boost::asio::any_io_executor ex,
                                          std::chrono::milliseconds how_long) {
  boost::asio::steady_timer timer(ex);
  timer.expires_after(how_long);
  co_await timer.async_wait(boost::asio::use_awaitable);
}

/// A blocking HTTP/1.0 POST to the gateway on 127.0.0.1:`port` (with `token` as its
/// Authorization when given); returns the whole reply, status line included.
inline std::string Post(std::uint16_t port, const std::string& path, const std::string& body,
                        const std::string& token = "") {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  std::string request = "POST " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\n";
  if (!token.empty()) request += "Authorization: " + token + "\r\n";
  request += "\r\n" + body;
  REQUIRE(::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
  std::string reply;
  char buf[4096];
  for (int i = 0; i < 256; ++i) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    reply.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return reply;
}

}  // namespace gculaunch::etcd::gateway_test
