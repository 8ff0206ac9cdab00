#include "launcher/sys/proc_signals.h"

#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace gculaunch::sys {
namespace {

void Noop(int /*sig*/) {}

}  // namespace

TEST_CASE("proc signals: the masks of a status text", "[proc_signals]") {
  const std::string status =
      "Name:\tpython3\nSigQ:\t0/63382\nSigPnd:\t0000000000000000\n"
      "SigBlk:\t0000000000000000\nSigIgn:\t0000000001001000\n"
      "SigCgt:\t0000080180004a02\nCapInh:\t0000000000000000\n";
  REQUIRE(ParseStatusMask(status, "SigCgt") == 0x0000080180004a02ULL);
  CHECK(ParseStatusMask(status, "SigIgn") == 0x1001000ULL);
  CHECK_FALSE(ParseStatusMask(status, "SigFoo"));
  CHECK_FALSE(ParseStatusMask("SigCgt:\tnot-hex\n", "SigCgt"));
  CHECK_FALSE(ParseStatusMask("SigCgt:\t\n", "SigCgt"));
  CHECK_FALSE(ParseStatusMask("XSigCgt:\t1\n", "SigCgt"));
  const unsigned long long cgt = *ParseStatusMask(status, "SigCgt");
  CHECK(MaskHas(cgt, 2));        // SIGINT: bit 1 (0x2)
  CHECK_FALSE(MaskHas(cgt, 1));  // SIGHUP
  CHECK(MaskHas(cgt, 44));       // 0x0000080000000000 is bit 43: signal 44
  CHECK_FALSE(MaskHas(cgt, 45));
  CHECK(MaskHas(1ULL << 63U, 64));
}

TEST_CASE("proc signals: this process, with and without a handler", "[proc_signals]") {
  const int sig = SIGRTMIN + 10;
  struct sigaction old {};
  struct sigaction handler {};
  handler.sa_handler = Noop;
  sigemptyset(&handler.sa_mask);
  REQUIRE(::sigaction(sig, &handler, &old) == 0);
  auto caught = CatchesSignal(::getpid(), sig);
  REQUIRE(caught.ok());
  CHECK(*caught);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  REQUIRE(::sigaction(sig, &dfl, nullptr) == 0);
  caught = CatchesSignal(::getpid(), sig);
  REQUIRE(caught.ok());
  CHECK_FALSE(*caught);
  ::sigaction(sig, &old, nullptr);
}

TEST_CASE("proc signals: a process that does not exist", "[proc_signals]") {
  // Above the kernel's pid_max limit (4194304): never a process.
  auto caught = CatchesSignal(1 << 23, SIGRTMIN + 10);
  REQUIRE_FALSE(caught.ok());
  CHECK(caught.error().what == "cannot read /proc/8388608/status: No such file or directory");
  CHECK(caught.error().hint == "the process has exited");
}

}  // namespace gculaunch::sys
