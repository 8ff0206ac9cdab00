// Connection: one connection of the etcd client to one endpoint, plain TCP or TLS, for
// client.cc.
//
// A TLS connection is Beast's ssl_stream (OpenSSL, linked statically) over the same
// tcp_stream, so the connect and request time limits apply to the handshake and to every
// read and write alike. The server's certificate must chain to the context's CA store and
// name the endpoint's host: a DNS name is checked against the certificate's DNS names (and
// sent as SNI), an IP address against its IP SANs. A failed handshake is an Error naming the
// endpoint, OpenSSL's reason and, for a certificate that did not verify, which certificate.
//
//   auto tls = MakeTlsContext(options.tls);                  // once per client
//   auto conn = co_await Connection::Open(executor, endpoint, tls->get(), timeout);
//   co_await (*conn)->Write(request, ec);
//
// OpenSSL is initialised without reading any openssl.cnf: a static binary would otherwise look
// for the configuration at the build machine's path (docs/etcd.md, "TLS").
//
// Lifetime and threading: the context must outlive its connections (the client's shared state
// holds both); one executor, one thread. Sockets are close-on-exec.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "base/error.h"
#include "etcd/client.h"

namespace gculaunch::etcd {

/// The client side of TLS, made from `options` (files read now): TLS 1.2 or newer, the peer
/// verified against options.ca_file (or the system's CA store when it is ""), the client
/// certificate and key when given. An Error names the file that could not be used and why.
Result<std::shared_ptr<boost::asio::ssl::context>> MakeTlsContext(const TlsOptions& options);

class Connection {
 public:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;
  using Parser = boost::beast::http::response_parser<boost::beast::http::string_body>;
  using StreamParser = boost::beast::http::response_parser<boost::beast::http::buffer_body>;

  /// Connects to `endpoint` (each resolved address in turn), then, for an https:// endpoint,
  /// shakes hands with `tls` (REQUIRES: not null then). `timeout` bounds the connect and the
  /// handshake each.
  static boost::asio::awaitable<Result<std::unique_ptr<Connection>>> Open(
      boost::asio::any_io_executor executor, Endpoint endpoint, boost::asio::ssl::context* tls,
      std::chrono::milliseconds timeout);

  explicit Connection(boost::beast::tcp_stream tcp);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  /// The TCP layer: its time limit (expires_after) and its socket (close).
  boost::beast::tcp_stream& tcp();

  // Beast's HTTP operations on whichever stream this is; errors in `ec`.
  boost::asio::awaitable<void> Write(Request& request, boost::system::error_code& ec);
  boost::asio::awaitable<void> Read(boost::beast::flat_buffer& buffer, Parser& parser,
                                    boost::system::error_code& ec);
  boost::asio::awaitable<void> ReadHeader(boost::beast::flat_buffer& buffer, StreamParser& parser,
                                          boost::system::error_code& ec);
  boost::asio::awaitable<void> ReadSome(boost::beast::flat_buffer& buffer, StreamParser& parser,
                                        boost::system::error_code& ec);

  /// Closes the socket now (a pending operation ends with an error).
  void Close();

 private:
  boost::asio::awaitable<Status> Handshake(const Endpoint& endpoint,
                                           boost::asio::ssl::context& context,
                                           std::chrono::milliseconds timeout);

  std::optional<boost::beast::tcp_stream> plain_;
  std::optional<boost::beast::ssl_stream<boost::beast::tcp_stream>> tls_;
  /// The first certificate that failed verification, described (for the error).
  std::string rejected_;
};

}  // namespace gculaunch::etcd
