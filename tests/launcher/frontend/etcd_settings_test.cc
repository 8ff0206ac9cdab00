#include "launcher/frontend/etcd_settings.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <variant>
#include <vector>

#include "launcher/frontend/cli.h"
#include "launcher/frontend/dry_run.h"
#include "launcher/frontend/launch_spec.h"
#include "tests/support/frontend_fakes.h"

namespace gculaunch {
namespace {

// The spec's etcd settings, null when its backend is not etcd.
const EtcdSettings* EtcdOf(const LaunchSpec& spec) { return std::get_if<EtcdSettings>(&spec.rdzv); }

using testing::FakeDeviceProbe;
using testing::FakeFileAccess;

struct Fixture {
  FakeDeviceProbe probe;
  FakeFileAccess files;
  EnvMap env{{"PATH", "/usr/bin:/bin"}, {"HOME", "/home/u"}};
  PlatformInfo platform;

  Fixture() { files.executables["python3"] = "/usr/bin/python3"; }

  Result<LaunchSpec> Make(std::vector<std::string> args) {
    args.emplace_back("train.py");
    auto cli = ParseCli(args, env);
    if (!cli.ok()) FAIL(cli.error().Format());
    return MakeLaunchSpec(cli->options, env, probe, files, platform);
  }
  LaunchSpec Spec(const std::vector<std::string>& args) {
    auto spec = Make(args);
    if (!spec.ok()) FAIL(spec.error().Format());
    return std::move(*spec);
  }
  EtcdSettings Etcd(std::vector<std::string> args) {
    args.insert(args.begin(), {"--rdzv-backend", "etcd", "--rdzv-id", "job-7"});
    LaunchSpec spec = Spec(args);
    REQUIRE(EtcdOf(spec));
    return *EtcdOf(spec);
  }
  std::string Err(const std::vector<std::string>& args) {
    auto spec = Make(args);
    REQUIRE_FALSE(spec.ok());
    return spec.error().Format();
  }
  std::string EtcdErr(std::vector<std::string> args) {
    args.insert(args.begin(), {"--rdzv-backend", "etcd", "--rdzv-id", "job-7"});
    return Err(args);
  }
};

TEST_CASE("etcd settings: the defaults", "[etcd_settings]") {
  Fixture f;
  LaunchSpec spec = f.Spec(
      {"--rdzv-backend", "etcd", "--rdzv-endpoint", "e1", "--rdzv-id", "job-7", "--nnodes", "2"});
  REQUIRE(EtcdOf(spec));
  const EtcdSettings& s = *EtcdOf(spec);
  CHECK(spec.rdzv_backend == "etcd");
  CHECK(s.backend == "etcd");
  CHECK(s.endpoints == std::vector<std::string>{"e1:2379"});
  CHECK(s.rdzv_id == "job-7");
  CHECK(spec.run_id == "job-7");
  CHECK(s.key_prefix == "/gculaunch/job-7/");
  CHECK(s.lease_ttl_s == 15);  // half of --node-timeout
  CHECK(s.request_timeout_s == 5);
  CHECK_FALSE(s.tls);
  CHECK(s.user.empty());
  // Two nodes need no --master-addr: the store's host is found in etcd, and the endpoint is
  // etcd's, not the store's.
  CHECK(spec.master_addr == "127.0.0.1");
  CHECK(spec.master_port == 29500);
  CHECK(s.Describe() ==
        "endpoints e1:2379, keys /gculaunch/job-7/, lease TTL 15 s, request timeout 5 s, no "
        "authentication, no TLS");
}

TEST_CASE("etcd settings: the lease TTL follows --node-timeout and never exceeds it",
          "[etcd_settings]") {
  Fixture f;
  const std::vector<std::string> etcd = {"--rdzv-backend", "etcd",  "--rdzv-endpoint", "e1",
                                         "--rdzv-id",      "job-7", "--nnodes",        "2"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = etcd;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  CHECK(f.Etcd(with({"--node-timeout", "60"})).lease_ttl_s == 30);
  CHECK(f.Etcd(with({"--node-timeout", "3"})).lease_ttl_s == 2);
  CHECK(f.Etcd(with({"--rdzv-conf", "lease_ttl=30"})).lease_ttl_s == 30);
  CHECK(f.Etcd(with({"--node-timeout", "8", "--rdzv-conf", "lease_ttl=5"})).lease_ttl_s == 5);
  CHECK(f.Err(with({"--rdzv-conf", "lease_ttl=40"})) ==
        "gculaunch: --rdzv-conf lease_ttl=40 is longer than --node-timeout 30 s: etcd would "
        "keep a silent node longer than the job allows (fix: give lease_ttl at most "
        "--node-timeout (e.g. lease_ttl=15), or raise --node-timeout)");
}

TEST_CASE("etcd settings: etcd-v2 is the same backend, with a note", "[etcd_settings]") {
  Fixture f;
  LaunchSpec spec =
      f.Spec({"--rdzv-backend", "etcd-v2", "--rdzv-endpoint", "e1:2379", "--run-id", "j"});
  REQUIRE(EtcdOf(spec));
  CHECK(EtcdOf(spec)->backend == "etcd-v2");
  CHECK(EtcdOf(spec)->key_prefix == "/gculaunch/j/");
  CHECK(std::any_of(spec.notes.begin(), spec.notes.end(), [](const std::string& note) {
    return note.find("speaks etcd's v3 API, so etcd needs no --enable-v2") != std::string::npos;
  }));
}

TEST_CASE("etcd settings: the job id is required and 'none' refused", "[etcd_settings]") {
  Fixture f;
  const std::string fix = "(fix: give the job's name, the same on every node: --rdzv-id $JOB_NAME)";
  CHECK(f.Err({"--rdzv-backend", "etcd", "--rdzv-endpoint", "e1", "--rdzv-id", "none"}) ==
        "gculaunch: --rdzv-id 'none' (torchrun's default) cannot name an etcd job: every job "
        "would share the keys, and a crashed run's leftovers be adopted " +
            fix);
  CHECK(f.Err({"--rdzv-backend", "etcd", "--rdzv-endpoint", "e1"}) ==
        "gculaunch: --rdzv-backend etcd needs --rdzv-id: it names the job's keys in etcd "
        "(<etcd_prefix>/<id>/) " +
            fix);
  CHECK(f.Err({"--rdzv-backend", "etcd-v2", "--rdzv-endpoint", "e1", "--run-id", "none"})
            .find("--run-id 'none'") != std::string::npos);
}

TEST_CASE("etcd settings: endpoint lists", "[etcd_settings]") {
  Fixture f;
  CHECK(f.Etcd({"--rdzv-endpoint", " e1:2380, http://e2 ,[fd00::1]:2379,e1:2380"}).endpoints ==
        std::vector<std::string>{"e1:2380", "e2:2379", "[fd00::1]:2379"});
  EtcdSettings https = f.Etcd({"--rdzv-endpoint", "https://e1:2379,https://e2:2379/"});
  CHECK(https.tls);
  CHECK(https.endpoints == std::vector<std::string>{"e1:2379", "e2:2379"});
  CHECK(f.EtcdErr({"--rdzv-endpoint", "http://e1,https://e2"}) ==
        "gculaunch: --rdzv-endpoint 'http://e1,https://e2' mixes http:// and https:// (fix: "
        "use one scheme for every endpoint)");
  CHECK(f.EtcdErr({"--rdzv-endpoint", "e1:0,e2"}) ==
        "gculaunch: --rdzv-endpoint 'e1:0,e2': 'e1:0': the port must be 1-65535 (fix: give "
        "HOST:PORT[,HOST:PORT...], e.g. --rdzv-endpoint 10.0.0.5:2379,10.0.0.6:2379)");
  CHECK(f.EtcdErr({"--rdzv-endpoint", "e1,,e2"}).find("'' is not HOST[:PORT]") !=
        std::string::npos);
  CHECK(f.EtcdErr({"--rdzv-endpoint", "unix://sock,e2"}).find("has the scheme unix") !=
        std::string::npos);
  CHECK(f.EtcdErr({"--rdzv-endpoint", "fd00::1:2379,e2"}).find("needs brackets") !=
        std::string::npos);
  CHECK(f.EtcdErr({}) ==
        "gculaunch: --rdzv-backend etcd needs the etcd endpoints (fix: give --rdzv-endpoint "
        "HOST:2379[,HOST:2379...] (etcd's client URLs))");
}

TEST_CASE("etcd settings: TLS from protocol, a scheme or a certificate", "[etcd_settings]") {
  Fixture f;
  f.files.other_files = {"/ca.pem", "/c.pem", "/k.pem"};
  CHECK(f.Etcd({"--rdzv-endpoint", "e1", "--rdzv-conf", "protocol=HTTPS"}).tls);
  EtcdSettings v1 =
      f.Etcd({"--rdzv-endpoint", "e1", "--rdzv-conf", "cacert=/ca.pem,cert=/c.pem,key=/k.pem"});
  EtcdSettings v2 = f.Etcd({"--rdzv-endpoint", "e1", "--rdzv-conf",
                            "ca_cert=/ca.pem,ssl_cert=/c.pem,ssl_cert_key=/k.pem"});
  CHECK(v1 == v2);
  CHECK(v1.tls);
  CHECK(v1.ca_cert == "/ca.pem");
  CHECK(v1.cert == "/c.pem");
  CHECK(v1.key == "/k.pem");
  CHECK(v1.Describe().find("TLS (CA /ca.pem, cert /c.pem, key /k.pem)") != std::string::npos);
  CHECK(f.Etcd({"--rdzv-endpoint", "e1", "--rdzv-conf", "cacert=/ca.pem"}).tls);
  CHECK(f.EtcdErr({"--rdzv-endpoint", "e1", "--rdzv-conf", "protocol=http,cacert=/ca.pem"}) ==
        "gculaunch: --rdzv-conf protocol=http with a certificate file: the files need https "
        "(fix: use protocol=https, or drop cacert/cert/key)");
  CHECK(f.EtcdErr({"--rdzv-endpoint", "https://e1", "--rdzv-conf", "protocol=http"})
            .find("disagrees with the scheme of --rdzv-endpoint") != std::string::npos);
  CHECK(f.EtcdErr({"--rdzv-endpoint", "e1", "--rdzv-conf", "key=/k.pem"}) ==
        "gculaunch: --rdzv-conf key=/k.pem without cert: a key belongs to a certificate (fix: "
        "add cert=CLIENT.pem (ssl_cert), or drop key)");
  CHECK(f.EtcdErr({"--rdzv-endpoint", "e1", "--rdzv-conf", "ca_cert=/missing.pem"}) ==
        "gculaunch: --rdzv-conf cacert=/missing.pem: no such file (fix: give the path of the "
        "PEM file, readable on every node)");
  CHECK(f.EtcdErr({"--rdzv-endpoint", "e1", "--rdzv-conf", "cacert=/ca.pem,ca_cert=/c.pem"}) ==
        "gculaunch: --rdzv-conf: 'cacert' and 'ca_cert' are two names of one setting and "
        "disagree (fix: give only one of them)");
}

TEST_CASE("etcd settings: user, password, prefix, lease TTL, request timeout", "[etcd_settings]") {
  Fixture f;
  f.files.files["/run/pw"] = "s3cret\n";
  f.files.files["/run/empty"] = "\n";
  EtcdSettings s = f.Etcd({"--rdzv-endpoint", "e1", "--rdzv-conf",
                           "username=alice,password_file=/run/pw,etcd_prefix=/train/,lease_ttl="
                           "15,read_timeout=2.5"});
  CHECK(s.user == "alice");
  CHECK(s.password == "s3cret");
  CHECK(s.etcd_prefix == "/train");
  CHECK(s.key_prefix == "/train/job-7/");
  CHECK(s.lease_ttl_s == 15);
  CHECK(s.request_timeout_s == 2.5);
  CHECK(s.Describe().find("s3cret") == std::string::npos);
  CHECK(s.Describe().find("user alice (password given)") != std::string::npos);
  CHECK(f.Etcd({"--rdzv-endpoint", "e1", "--rdzv-conf", "user=a,password=b"}).password == "b");
  CHECK(f.EtcdErr({"--rdzv-endpoint", "e1", "--rdzv-conf", "user=alice"}) ==
        "gculaunch: --rdzv-conf user=alice without a password (fix: add password_file=PATH, or "
        "set GCULAUNCH_ETCD_PASSWORD)");
  CHECK(f.EtcdErr({"--rdzv-endpoint", "e1", "--rdzv-conf", "password=x"}) ==
        "gculaunch: --rdzv-conf: a password without a user (fix: add user=NAME (the etcd user "
        "the password belongs to))");
  CHECK(f.EtcdErr({"--rdzv-endpoint", "e1", "--rdzv-conf", "user=a,password_file=/run/empty"})
            .find("is empty") != std::string::npos);
  CHECK(f.EtcdErr({"--rdzv-endpoint", "e1", "--rdzv-conf", "user=a,password_file=/nope"})
            .find("password_file=/nope: cannot read '/nope'") != std::string::npos);
  CHECK(f.EtcdErr({"--rdzv-endpoint", "e1", "--rdzv-conf",
                   "user=a,password=b,password_file=/"
                   "run/pw"})
            .find("password and password_file both given") != std::string::npos);
  CHECK(f.EtcdErr({"--rdzv-endpoint", "e1", "--rdzv-conf", "read_timeout=0"}) ==
        "gculaunch: --rdzv-conf read_timeout=0: one etcd request needs more than 0 seconds "
        "(fix: e.g. read_timeout=5)");
}

TEST_CASE("etcd settings: the password from GCULAUNCH_ETCD_PASSWORD", "[etcd_settings]") {
  Fixture f;
  f.files.files["/run/pw"] = "fromfile\n";
  f.env.Set("GCULAUNCH_ETCD_PASSWORD", "S3cretPW");
  EtcdSettings s = f.Etcd({"--rdzv-endpoint", "e1", "--rdzv-conf", "user=alice"});
  CHECK(s.user == "alice");
  CHECK(s.password == "S3cretPW");
  CHECK(s.Describe().find("user alice (password given)") != std::string::npos);
  // Two ways at once is an error that shows neither password.
  const std::string both =
      f.EtcdErr({"--rdzv-endpoint", "e1", "--rdzv-conf", "user=alice,password=other"});
  CHECK(both ==
        "gculaunch: --rdzv-conf: password given while GCULAUNCH_ETCD_PASSWORD is set (fix: give "
        "the password one way only: unset GCULAUNCH_ETCD_PASSWORD, or drop it from "
        "--rdzv-conf)");
  CHECK(f.EtcdErr({"--rdzv-endpoint", "e1", "--rdzv-conf", "user=alice,password_file=/run/pw"})
            .find("password_file given while GCULAUNCH_ETCD_PASSWORD is set") != std::string::npos);
  const std::string no_user = f.EtcdErr({"--rdzv-endpoint", "e1"});
  CHECK(no_user ==
        "gculaunch: GCULAUNCH_ETCD_PASSWORD is set but --rdzv-conf names no user (fix: add "
        "user=NAME (the etcd user the password belongs to), or unset GCULAUNCH_ETCD_PASSWORD)");
  for (const std::string& message : {both, no_user}) {
    CHECK(message.find("S3cretPW") == std::string::npos);
    CHECK(message.find("other") == std::string::npos);
  }
  // The dry run says only that a password is set, and no rank gets it.
  LaunchSpec spec = f.Spec({"--rdzv-backend", "etcd", "--rdzv-id", "job-7", "--rdzv-endpoint", "e1",
                            "--rdzv-conf", "user=alice", "--dry-run"});
  for (DryRunFormat format : {DryRunFormat::kTable, DryRunFormat::kEnv, DryRunFormat::kJson}) {
    const std::string out = RenderDryRun(spec, f.env, format);
    CHECK(out.find("S3cretPW") == std::string::npos);
    CHECK(out.find("GCULAUNCH_ETCD_PASSWORD") == std::string::npos);
  }
  CHECK(RenderDryRun(spec, f.env, DryRunFormat::kTable).find("user alice (password given)") !=
        std::string::npos);
}

TEST_CASE("etcd settings: a password in PET_RDZV_CONF stays out of the dry run's ranks",
          "[etcd_settings]") {
  Fixture f;
  f.env.Set("PET_RDZV_CONF", "user=alice,password=S3cretPW,lease_ttl=5");
  LaunchSpec spec = f.Spec(
      {"--rdzv-backend", "etcd", "--rdzv-id", "job-7", "--rdzv-endpoint", "e1", "--dry-run"});
  REQUIRE(EtcdOf(spec));
  CHECK(EtcdOf(spec)->password == "S3cretPW");
  for (DryRunFormat format : {DryRunFormat::kTable, DryRunFormat::kEnv, DryRunFormat::kJson}) {
    CHECK(RenderDryRun(spec, f.env, format).find("S3cretPW") == std::string::npos);
  }
  CHECK(RenderDryRun(spec, f.env, DryRunFormat::kEnv)
            .find("export PET_RDZV_CONF='user=alice,lease_ttl=5'\n") != std::string::npos);
}

TEST_CASE("etcd settings: etcd's keys and lists belong to the etcd backend", "[etcd_settings]") {
  Fixture f;
  CHECK(f.Err({"--rdzv-backend", "c10d", "--rdzv-endpoint", "n0:29400", "--rdzv-conf",
               "lease_ttl=10"}) ==
        "gculaunch: --rdzv-conf 'lease_ttl' is a key of the etcd backend, not of c10d (fix: add "
        "--rdzv-backend etcd, or drop lease_ttl)");
  CHECK(f.Err({"--rdzv-endpoint", "n0:29400,n1:29400"}) ==
        "gculaunch: --rdzv-endpoint 'n0:29400,n1:29400': a list of endpoints (or a URL) is only "
        "for --rdzv-backend etcd (fix: give one HOST:PORT, e.g. --rdzv-endpoint node0:29400)");
  // --standalone wins, as in torchrun: the etcd settings are not even checked.
  LaunchSpec standalone = f.Spec({"--standalone", "--rdzv-backend", "etcd"});
  CHECK_FALSE(EtcdOf(standalone));
  CHECK(std::any_of(standalone.notes.begin(), standalone.notes.end(), [](const std::string& n) {
    return n.find("is ignored with --standalone") != std::string::npos;
  }));
}

TEST_CASE("etcd settings: the dry run shows them without the password", "[etcd_settings]") {
  Fixture f;
  LaunchSpec spec = f.Spec({"--rdzv-backend", "etcd", "--rdzv-id", "job-7", "--rdzv-endpoint",
                            "e1,e2", "--rdzv-conf", "user=alice,password=s3cret", "--dry-run"});
  for (DryRunFormat format : {DryRunFormat::kTable, DryRunFormat::kEnv, DryRunFormat::kJson}) {
    const std::string out = RenderDryRun(spec, f.env, format);
    CHECK(out.find("e1:2379") != std::string::npos);
    CHECK(out.find("/gculaunch/job-7/") != std::string::npos);
    CHECK(out.find("alice") != std::string::npos);
    CHECK(out.find("s3cret") == std::string::npos);
  }
  CHECK(RenderDryRun(spec, f.env, DryRunFormat::kTable)
            .find("  etcd:    endpoints e1:2379,e2:2379, keys /gculaunch/job-7/, lease TTL 15 s, "
                  "request timeout 5 s, user alice (password given), no TLS\n") !=
        std::string::npos);
}

}  // namespace
}  // namespace gculaunch
