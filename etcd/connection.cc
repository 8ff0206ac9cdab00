#include "etcd/connection.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/verify_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/system/system_error.hpp>
#include <cerrno>
#include <cstring>
#include <mutex>

// GCC 12 reports a false -Wmismatched-new-delete where Asio's awaitable frames (allocated by
// Asio's own operator new) are inlined into their callers.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace gculaunch::etcd {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;

namespace {

auto Nothrow(boost::system::error_code& ec) {
  return asio::redirect_error(asio::use_awaitable, ec);
}

// OpenSSL without its configuration file: a static libssl looks for openssl.cnf at the build
// machine's OPENSSLDIR, which an old training image may lack or fill with settings (providers,
// engines) this OpenSSL cannot load. Must run before anything else initialises OpenSSL.
void InitOpenSsl() {
  static std::once_flag once;
  std::call_once(once, [] {
    OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG | OPENSSL_INIT_LOAD_SSL_STRINGS |
                         OPENSSL_INIT_LOAD_CRYPTO_STRINGS,
                     nullptr);
  });
}

// The CA bundles of the common distributions, tried after OpenSSL's own default paths (which
// name the build machine's directory, /usr/lib/ssl on Debian).
constexpr std::array<const char*, 4> kSystemBundles = {
    "/etc/ssl/certs/ca-certificates.crt",  // Debian, Ubuntu, Arch
    "/etc/pki/tls/certs/ca-bundle.crt",    // RHEL, CentOS, Fedora
    "/etc/ssl/ca-bundle.pem",              // SUSE
    "/etc/ssl/cert.pem",                   // Alpine
};

// "" when `path` can be opened for reading, else the reason.
std::string Unreadable(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  return "";
}

// Loads one PEM file into the context with `load`; an Error names the file, what it should
// hold and the option that names it.
template <typename Load>
Status LoadFile(const std::string& path, const char* what, const char* option, Load load) {
  const std::string fix = std::string("give ") + option + " a readable PEM file holding " + what;
  if (std::string why = Unreadable(path); !why.empty()) {
    return Error{"etcd TLS: cannot read the " + std::string(option) + " '" + path + "': " + why,
                 fix};
  }
  boost::system::error_code ec;
  load(path, ec);
  if (ec) {
    return Error{
        "etcd TLS: the " + std::string(option) + " '" + path + "' is not usable: " + ec.message(),
        fix};
  }
  return OkStatus();
}

std::string NameOf(const X509_NAME* name) {
  if (name == nullptr) return "?";
  std::array<char, 256> text{};
  X509_NAME_oneline(name, text.data(), static_cast<int>(text.size()));
  return text.data();
}

// Why a handshake failed, from OpenSSL's verify result when the certificate was the reason.
std::string HandshakeFailure(SSL* ssl, const boost::system::error_code& ec,
                             const std::string& rejected, std::chrono::milliseconds timeout) {
  if (ec == beast::error::timeout)
    return "no answer within " + std::to_string(timeout.count()) + " ms";
  const long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK) {
    std::string why =
        std::string("certificate verify failed: ") + X509_verify_cert_error_string(verify);
    if (!rejected.empty()) why += " (" + rejected + ")";
    return why;
  }
  return ec.message();
}

std::string HandshakeHint(SSL* ssl, const boost::system::error_code& ec) {
  const long verify = SSL_get_verify_result(ssl);
  if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH) {
    return "connect by a name or address that etcd's server certificate holds in its "
           "subjectAltName (DNS: or IP:), or reissue the certificate with it";
  }
  if (verify != X509_V_OK) {
    return "give the CA certificate that signed etcd's server certificate as the CA file "
           "(etcd's --cert-file is signed by it)";
  }
  if (ec.category() == asio::error::get_ssl_category()) {
    return "check that etcd serves TLS at this address (--cert-file, --key-file, https:// "
           "client URLs); use http:// for a plain etcd";
  }
  return "";
}

}  // namespace

Result<std::shared_ptr<ssl::context>> MakeTlsContext(const TlsOptions& options) {
  InitOpenSsl();
  if (options.cert_file.empty() != options.key_file.empty()) {
    return Error{"etcd TLS: a client certificate needs both the certificate and its key file",
                 "give both cert and key, or neither"};
  }
  std::shared_ptr<ssl::context> context;
  try {  // Asio throws when OpenSSL cannot make a context; the client reports, never throws
    context = std::make_shared<ssl::context>(ssl::context::tls_client);
  } catch (const boost::system::system_error& e) {
    return Error{std::string("etcd TLS: OpenSSL could not make a TLS context: ") + e.what(), ""};
  }
  boost::system::error_code settings;
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                           ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                           ssl::context::no_tlsv1_1,
                       settings);
  if (!settings) context->set_verify_mode(ssl::verify_peer, settings);
  if (settings)
    return Error{"etcd TLS: OpenSSL refused the TLS settings: " + settings.message(), ""};
  if (!options.ca_file.empty()) {
    // Only this file: the build machine's CA paths play no part.
    auto loaded = LoadFile(options.ca_file, "the CA certificate that signed etcd's certificate",
                           "CA file", [&](const std::string& path, boost::system::error_code& ec) {
                             context->load_verify_file(path, ec);
                           });
    if (!loaded.ok()) return loaded.error();
  } else {
    boost::system::error_code ignored;
    context->set_default_verify_paths(ignored);
    for (const char* bundle : kSystemBundles) {
      if (Unreadable(bundle).empty()) {
        context->load_verify_file(bundle, ignored);
        break;
      }
    }
  }
  if (!options.cert_file.empty()) {
    auto cert = LoadFile(options.cert_file, "the client certificate", "client certificate file",
                         [&](const std::string& path, boost::system::error_code& ec) {
                           context->use_certificate_chain_file(path, ec);
                         });
    if (!cert.ok()) return cert.error();
    bool mismatch = false;
    auto key = LoadFile(options.key_file, "the client certificate's private key", "key file",
                        [&](const std::string& path, boost::system::error_code& ec) {
                          context->use_private_key_file(path, ssl::context::pem, ec);
                          mismatch = ec && ERR_GET_REASON(static_cast<unsigned long>(ec.value())) ==
                                               X509_R_KEY_VALUES_MISMATCH;
                        });
    if (mismatch || (key.ok() && SSL_CTX_check_private_key(context->native_handle()) != 1)) {
      return Error{"etcd TLS: the key file '" + options.key_file +
                       "' does not match the client certificate '" + options.cert_file + "'",
                   "give the private key of that certificate"};
    }
    if (!key.ok()) return key.error();
  }
  return context;
}

Connection::Connection(beast::tcp_stream tcp) : plain_(std::move(tcp)) {}

Connection::~Connection() = default;

beast::tcp_stream& Connection::tcp() { return tls_ ? tls_->next_layer() : *plain_; }

void Connection::Close() {
  boost::system::error_code ignored;
  tcp().socket().close(ignored);
}

asio::awaitable<Result<std::unique_ptr<Connection>>> Connection::Open(
    asio::any_io_executor executor, Endpoint endpoint, ssl::context* tls,
    std::chrono::milliseconds timeout) {
  const std::string name = endpoint.ToString();
  boost::system::error_code ec;
  asio::ip::tcp::resolver resolver(executor);
  auto results =
      co_await resolver.async_resolve(endpoint.host, std::to_string(endpoint.port), Nothrow(ec));
  if (ec) co_return Error{name + ": cannot resolve the host: " + ec.message(), ""};
  std::string why = "no address";
  for (const auto& entry : results) {
    // The socket is close-on-exec from birth (Asio's open() does not set the flag; an assigned
    // socket is not reopened by connect).
    const asio::ip::tcp protocol = entry.endpoint().protocol();
    const int fd = ::socket(protocol.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) co_return Error{name + ": socket() failed", ""};
    beast::tcp_stream stream(executor);
    stream.socket().assign(protocol, fd, ec);
    if (ec) co_return Error{name + ": " + ec.message(), ""};
    stream.expires_after(timeout);
    co_await stream.async_connect(entry.endpoint(), Nothrow(ec));
    if (ec) {
      why = ec == beast::error::timeout
                ? "no answer within " + std::to_string(timeout.count()) + " ms"
                : ec.message();
      continue;
    }
    auto connection = std::make_unique<Connection>(std::move(stream));
    if (endpoint.tls) {
      auto shaken = co_await connection->Handshake(endpoint, *tls, timeout);
      if (!shaken.ok()) co_return shaken.error();
    }
    co_return std::move(connection);
  }
  co_return Error{name + ": cannot connect: " + why, ""};
}

asio::awaitable<Status> Connection::Handshake(const Endpoint& endpoint, ssl::context& context,
                                              std::chrono::milliseconds timeout) {
  tls_.emplace(std::move(*plain_), context);
  plain_.reset();
  SSL* ssl = tls_->native_handle();
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(endpoint.host, ec);
  if (!ec) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), address.to_string().c_str());
  } else {
    SSL_set_tlsext_host_name(ssl, endpoint.host.c_str());
    SSL_set1_host(ssl, endpoint.host.c_str());
  }
  // OpenSSL's verdict stands; the callback only remembers which certificate it refused.
  tls_->set_verify_callback([this](bool preverified, ssl::verify_context& verify) {
    if (!preverified && rejected_.empty()) {
      X509* cert = X509_STORE_CTX_get_current_cert(verify.native_handle());
      rejected_ = cert == nullptr ? std::string("no certificate")
                                  : "certificate " + NameOf(X509_get_subject_name(cert)) +
                                        " issued by " + NameOf(X509_get_issuer_name(cert));
    }
    return preverified;
  });
  tls_->next_layer().expires_after(timeout);
  ec = {};
  co_await tls_->async_handshake(ssl::stream_base::client, Nothrow(ec));
  if (!ec) co_return OkStatus();
  // A verdict of the TLS layer (a certificate, a protocol) stays the same on a retry; a
  // timeout or a reset does not.
  const bool verdict =
      ec != beast::error::timeout &&
      (SSL_get_verify_result(ssl) != X509_V_OK || ec.category() == asio::error::get_ssl_category());
  co_return Error{endpoint.ToString() +
                      ": TLS handshake failed: " + HandshakeFailure(ssl, ec, rejected_, timeout),
                  HandshakeHint(ssl, ec), verdict ? kRefusedExitCode : 0};
}

asio::awaitable<void> Connection::Write(Request& request, boost::system::error_code& ec) {
  if (tls_) {
    co_await http::async_write(*tls_, request, Nothrow(ec));
  } else {
    co_await http::async_write(*plain_, request, Nothrow(ec));
  }
}

asio::awaitable<void> Connection::Read(beast::flat_buffer& buffer, Parser& parser,
                                       boost::system::error_code& ec) {
  if (tls_) {
    co_await http::async_read(*tls_, buffer, parser, Nothrow(ec));
  } else {
    co_await http::async_read(*plain_, buffer, parser, Nothrow(ec));
  }
}

asio::awaitable<void> Connection::ReadHeader(beast::flat_buffer& buffer, StreamParser& parser,
                                             boost::system::error_code& ec) {
  if (tls_) {
    co_await http::async_read_header(*tls_, buffer, parser, Nothrow(ec));
  } else {
    co_await http::async_read_header(*plain_, buffer, parser, Nothrow(ec));
  }
}

asio::awaitable<void> Connection::ReadSome(beast::flat_buffer& buffer, StreamParser& parser,
                                           boost::system::error_code& ec) {
  if (tls_) {
    co_await http::async_read_some(*tls_, buffer, parser, Nothrow(ec));
  } else {
    co_await http::async_read_some(*plain_, buffer, parser, Nothrow(ec));
  }
}

}  // namespace gculaunch::etcd
