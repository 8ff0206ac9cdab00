// Tests of the etcd client's TLS (etcd/client.h, connection.h) against Debian's
// real etcd 3.4 serving https:// on loopback, with a test CA that each test makes with Debian's
// openssl command: key-value calls and a watch over TLS, a server certificate from another CA
// or for another name refused with the reason, etcd's --client-cert-auth, and files that
// cannot be used.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <functional>

#include "etcd/client.h"
#include "tests/etcd/gateway_fixture.h"
#include "tests/support/etcd_server.h"
#include "tests/support/test_util.h"

// GCC 12 reports a false -Wmismatched-new-delete where Asio's awaitable frames are inlined.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace gculaunch::etcd {
namespace {

namespace asio = boost::asio;
using gateway_test::Run;
using testing::EtcdServer;
using testing::TempDir;

// A test CA, a server certificate it signed for IP 127.0.0.1 (usable as a client certificate
// too: etcd's own gateway presents it to etcd's gRPC server under --client-cert-auth), a client
// certificate it signed, and a second CA with a server certificate of its own. EC P-256 keys:
// the whole set takes well under a second.
class TestPki {
 public:
  TestPki() {
    dir_.Write("server.ext",
               "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n");
    dir_.Write("client.ext", "extendedKeyUsage=clientAuth\n");
    const std::string script =
        "set -e; cd '" + dir_.path() +
        "'\n"
        "key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out $1.key; }\n"
        "ca() { key $1; openssl req -x509 -new -key $1.key -out $1.pem -days 2 -subj /CN=$2; }\n"
        "signed() { key $1; openssl req -new -key $1.key -out $1.csr -subj /CN=$2;\n"
        "  openssl x509 -req -in $1.csr -CA $3.pem -CAkey $3.key -CAcreateserial -days 2 \\\n"
        "    -extfile $4 -out $1.pem; }\n"
        "ca ca gculaunch-test-ca; ca other-ca other-test-ca\n"
        "signed server etcd-test-server ca server.ext\n"
        "signed client gculaunch-test-client ca client.ext\n"
        "signed other-server etcd-other-server other-ca server.ext\n";
    const std::string command =
        "bash '" + dir_.Write("make.sh", script) + "' > '" + dir_.File("openssl.log") + "' 2>&1";
    if (std::system(command.c_str()) != 0) {
      FAIL("openssl could not make the test CA (Debian's openssl: run scripts/bootstrap.sh): " +
           testing::ReadFile(dir_.File("openssl.log")));
    }
  }
  std::string File(const std::string& name) const { return dir_.File(name); }
  /// etcd serving https:// with the certificate `server` ("server" or "other-server").
  EtcdServer::Options Server(const std::string& server = "server") const {
    EtcdServer::Options options;
    options.cert_file = File(server + ".pem");
    options.key_file = File(server + ".key");
    return options;
  }

 private:
  TempDir dir_;
};

ClientOptions Options(const std::string& endpoints, const std::string& ca_file) {
  ClientOptions options;
  auto parsed = ParseEndpoints(endpoints);
  REQUIRE(parsed.ok());
  options.endpoints = *parsed;
  options.tls.ca_file = ca_file;
  options.connect_timeout = std::chrono::seconds(2);
  options.request_timeout = std::chrono::seconds(3);
  return options;
}

WatchOptions WatchOn(const std::string& key) {
  WatchOptions options;
  options.key = key;
  options.reconnect_timeout = std::chrono::seconds(3);
  return options;
}

TEST_CASE("TLS: put, get, a transaction and a watch over https:// with the test CA") {
  const TestPki pki;
  EtcdServer etcd(pki.Server());
  Run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    Client client(ex, Options(etcd.url(), pki.File("ca.pem")));
    auto put = co_await client.Put("/tls/a", "1");
    if (!put.ok()) FAIL(put.error().Format());
    auto opened = co_await client.OpenWatch(WatchOn("/tls/a"));
    if (!opened.ok()) FAIL(opened.error().Format());
    auto got = co_await client.Get("/tls/a");
    REQUIRE(got.ok());
    REQUIRE(got->kvs.size() == 1);
    CHECK(got->kvs[0].value == "1");
    auto put2 = co_await client.Put("/tls/a", "2");
    REQUIRE(put2.ok());
    auto batch = co_await (*opened)->Next();
    if (!batch.ok()) FAIL(batch.error().Format());
    REQUIRE(batch->events.size() == 1);
    CHECK(batch->events[0].kv.value == "2");
    // A broken TLS stream is reopened over TLS at the next revision.
    (*opened)->Disconnect();
    auto put3 = co_await client.Put("/tls/a", "3");
    REQUIRE(put3.ok());
    auto resumed = co_await (*opened)->Next();
    if (!resumed.ok()) FAIL(resumed.error().Format());
    REQUIRE(resumed->events.size() == 1);
    CHECK(resumed->events[0].kv.value == "3");
    auto version = co_await client.Version();
    REQUIRE(version.ok());
    CHECK(version->server.rfind("3.", 0) == 0);
  });
}

TEST_CASE("TLS: a certificate from another CA or for another name is refused with the reason") {
  const TestPki pki;
  EtcdServer etcd(pki.Server("other-server"));
  Run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    Client client(ex, Options(etcd.url(), pki.File("ca.pem")));
    auto refused = co_await client.Get("/x");
    REQUIRE(!refused.ok());
    CHECK(refused.error().Format() ==
          "gculaunch: no etcd endpoint answered /v3/kv/range: " + etcd.endpoint() +
              ": TLS handshake failed: certificate verify failed: unable to get local issuer "
              "certificate (certificate /CN=etcd-other-server issued by /CN=other-test-ca) "
              "(fix: give the CA certificate that signed etcd's server certificate as the CA "
              "file (etcd's --cert-file is signed by it))");
    CHECK(refused.error().exit_code == kRefusedExitCode);
    auto watch = co_await client.OpenWatch(WatchOn("/x"));
    REQUIRE(!watch.ok());
    CHECK(watch.error().what.find("certificate verify failed") != std::string::npos);

    // The right CA, but the certificate names IP 127.0.0.1, not "localhost".
    Client by_name(ex, Options("https://localhost:" + std::to_string(etcd.client_port()),
                               pki.File("other-ca.pem")));
    auto mismatch = co_await by_name.Get("/x");
    REQUIRE(!mismatch.ok());
    CHECK(mismatch.error().what.find("localhost:" + std::to_string(etcd.client_port()) +
                                     ": TLS handshake failed: certificate verify failed: "
                                     "hostname mismatch") != std::string::npos);
    CHECK(mismatch.error().hint.find("subjectAltName") != std::string::npos);
    CHECK(mismatch.error().exit_code == kRefusedExitCode);
    Client by_address(ex, Options(etcd.url(), pki.File("other-ca.pem")));
    auto matched = co_await by_address.Get("/x");
    if (!matched.ok()) FAIL(matched.error().Format());

    // Plain HTTP to a TLS port: a clear failure, no hang.
    Client plain(ex, Options(etcd.endpoint(), ""));
    auto garbled = co_await plain.Get("/x");
    CHECK(!garbled.ok());
  });
}

TEST_CASE("TLS: etcd's --client-cert-auth refuses a client without a certificate, not one with") {
  const TestPki pki;
  EtcdServer::Options server = pki.Server();
  server.trusted_ca_file = pki.File("ca.pem");
  server.client_cert_auth = true;
  EtcdServer etcd(server);
  Run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    Client anonymous(ex, Options(etcd.url(), pki.File("ca.pem")));
    auto refused = co_await anonymous.Put("/c", "1");
    REQUIRE(!refused.ok());
    CHECK(refused.error().what.find(etcd.endpoint() + ": /v3/kv/put failed: ") !=
          std::string::npos);
    CHECK(refused.error().hint ==
          "etcd may require a client certificate (--client-cert-auth): give the client "
          "certificate and key files");
    CHECK(refused.error().exit_code == kRefusedExitCode);
    auto no_watch = co_await anonymous.OpenWatch(WatchOn("/c"));
    REQUIRE(!no_watch.ok());
    CHECK(no_watch.error().hint == refused.error().hint);
    ClientOptions options = Options(etcd.url(), pki.File("ca.pem"));
    options.tls.cert_file = pki.File("client.pem");
    options.tls.key_file = pki.File("client.key");
    Client client(ex, options);
    auto put = co_await client.Put("/c", "1");
    if (!put.ok()) FAIL(put.error().Format());
    auto opened = co_await client.OpenWatch(WatchOn("/c"));
    if (!opened.ok()) FAIL(opened.error().Format());
    auto put2 = co_await client.Put("/c", "2");
    REQUIRE(put2.ok());
    auto batch = co_await (*opened)->Next();
    REQUIRE(batch.ok());
    REQUIRE(batch->events.size() == 1);
    CHECK(batch->events[0].kv.value == "2");
  });
}

TEST_CASE("TLS: a CA, certificate or key file that cannot be used is named with the fix") {
  const TestPki pki;
  Run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    const std::string missing = pki.File("no-such-ca.pem");
    Client no_ca(ex, Options("https://127.0.0.1:1", missing));
    auto failed = co_await no_ca.Get("/x");
    REQUIRE(!failed.ok());
    CHECK(failed.error().Format() ==
          "gculaunch: etcd TLS: cannot read the CA file '" + missing +
              "': No such file or directory (fix: give CA file a readable PEM file holding the CA "
              "certificate that signed etcd's certificate)");
    auto watch = co_await no_ca.OpenWatch(WatchOn("/x"));
    REQUIRE(!watch.ok());
    CHECK(watch.error().what == failed.error().what);

    Client not_pem(ex, Options("https://127.0.0.1:1", pki.File("server.ext")));
    auto bad = co_await not_pem.Get("/x");
    REQUIRE(!bad.ok());
    CHECK(bad.error().what.find("etcd TLS: the CA file '" + pki.File("server.ext") +
                                "' is not usable: ") == 0);

    ClientOptions wrong_key = Options("https://127.0.0.1:1", pki.File("ca.pem"));
    wrong_key.tls.cert_file = pki.File("client.pem");
    wrong_key.tls.key_file = pki.File("server.key");
    auto mismatched = co_await Client(ex, wrong_key).Get("/x");
    REQUIRE(!mismatched.ok());
    CHECK(mismatched.error().what == "etcd TLS: the key file '" + pki.File("server.key") +
                                         "' does not match the client certificate '" +
                                         pki.File("client.pem") + "'");

    ClientOptions half = Options("https://127.0.0.1:1", pki.File("ca.pem"));
    half.tls.cert_file = pki.File("client.pem");
    auto one_file = co_await Client(ex, half).Get("/x");
    REQUIRE(!one_file.ok());
    CHECK(one_file.error().hint == "give both cert and key, or neither");

    auto plain = co_await Client(ex, Options("127.0.0.1:1", pki.File("ca.pem"))).Get("/x");
    REQUIRE(!plain.ok());
    CHECK(plain.error().what == "etcd TLS files are given but the endpoint 127.0.0.1:1 is http://");
  });
}

}  // namespace
}  // namespace gculaunch::etcd
