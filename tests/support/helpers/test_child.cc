// gculaunch_test_child: a scriptable rank for gculaunch's tests.
//
// Runs its arguments as a sequence of steps, left to right:
//
//   print TEXT            write TEXT and a newline to stdout
//   eprint TEXT           same, to stderr
//   fds                   print "fds: 0 1 2 ..." (the descriptors this process has open)
//   env NAME              print "env NAME=value" (or "env NAME unset")
//   sigstate              print "sigstate blocked=<hex> ignored=<hex>" from /proc/self/status
//   pgid                  print "pgid <pgid> pid <pid>"
//   trap SIG FILE CODE    on SIG: append "SIG\n" to FILE, then _exit(CODE)
//   record SIG FILE       on SIG: append "SIG\n" to FILE and carry on
//   ignore SIG            set SIG to SIG_IGN
//   fifo PATH TEXT        open the FIFO PATH for writing and write TEXT + "\n" (a readiness signal)
//   readfifo PATH         open the FIFO PATH for reading and read until end-of-file
//   pidfile FILE          write this process's pid to FILE
//   grandchild FILE       fork a child that stays in this process group and sleeps;
//                         write its pid to FILE
//   lines N WIDTH TAG     write N lines "TAG <i> <WIDTH x's>" to stdout as fast as possible
//   elines N TAG          write N lines "TAG <i>" to stderr
//   raw TEXT              write TEXT without a newline to stdout (\r and \n escapes understood)
//   eraw TEXT             same, to stderr
//   sleep SECONDS         nanosleep (restarted after handled signals)
//   pause                 wait for signals forever
//   exit N                exit with code N
//   kill SIG              raise SIG
//   stat PATH             stat(PATH) and print "stat ok" or "stat failed"
//
// Signals are named without the SIG prefix: TERM, INT, USR1, ...  Only
// async-signal-safe calls are made in handlers.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

struct SignalAction {
  int sig = 0;
  char file[512] = {};
  int exit_code = -1;  // -1: carry on
  char line[16] = {};  // "NAME\n", written with one write() so lines from processes never mix
};
SignalAction g_actions[65];

int SignalNumber(const std::string& name) {
  static const std::pair<const char*, int> kNames[] = {
      {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"TERM", SIGTERM},
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"KILL", SIGKILL}, {"PIPE", SIGPIPE},
      {"ALRM", SIGALRM}, {"SEGV", SIGSEGV}, {"ABRT", SIGABRT}};
  for (const auto& [n, s] : kNames) {
    if (name == n) return s;
  }
  std::fprintf(stderr, "test_child: unknown signal %s\n", name.c_str());
  std::exit(100);
}

void WriteAll(int fd, const char* data, size_t len) {
  while (len > 0) {
    const ssize_t n = ::write(fd, data, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    len -= static_cast<size_t>(n);
  }
}

void Handler(int sig) {
  const SignalAction& action = g_actions[sig];
  const int fd = ::open(action.file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd >= 0) {
    WriteAll(fd, action.line, std::strlen(action.line));
    ::close(fd);
  }
  if (action.exit_code >= 0) ::_exit(action.exit_code);
}

void Install(const std::string& name, const std::string& file, int exit_code) {
  const int sig = SignalNumber(name);
  SignalAction& action = g_actions[sig];
  action.sig = sig;
  std::snprintf(action.file, sizeof action.file, "%s", file.c_str());
  std::snprintf(action.line, sizeof action.line, "%s\n", name.c_str());
  action.exit_code = exit_code;
  struct sigaction sa {};
  sa.sa_handler = Handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(sig, &sa, nullptr);
}

void Out(const std::string& text) {
  const std::string line = text + "\n";
  WriteAll(1, line.data(), line.size());
}

std::string Unescape(const std::string& in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\\' && i + 1 < in.size()) {
      ++i;
      out += in[i] == 'n' ? '\n' : in[i] == 'r' ? '\r' : in[i];
    } else {
      out += in[i];
    }
  }
  return out;
}

void SleepSeconds(double seconds) {
  timespec ts{
      static_cast<time_t>(seconds),
      static_cast<long>((seconds - static_cast<double>(static_cast<time_t>(seconds))) * 1e9)};
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto need = [&](size_t i, size_t n) {
    if (i + n >= args.size()) {
      std::fprintf(stderr, "test_child: step '%s' needs %zu argument(s)\n", args[i].c_str(), n);
      std::exit(100);
    }
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& step = args[i];
    if (step == "print") {
      need(i, 1);
      Out(args[++i]);
    } else if (step == "eprint") {
      need(i, 1);
      const std::string line = args[++i] + "\n";
      WriteAll(2, line.data(), line.size());
    } else if (step == "raw") {
      need(i, 1);
      const std::string text = Unescape(args[++i]);
      WriteAll(1, text.data(), text.size());
    } else if (step == "eraw") {
      need(i, 1);
      const std::string text = Unescape(args[++i]);
      WriteAll(2, text.data(), text.size());
    } else if (step == "fds") {
      std::string line = "fds:";
      DIR* dir = ::opendir("/proc/self/fd");
      const int dir_fd = dir != nullptr ? ::dirfd(dir) : -1;
      std::vector<int> fds;
      while (dir != nullptr) {
        const dirent* entry = ::readdir(dir);
        if (entry == nullptr) break;
        if (entry->d_name[0] == '.') continue;
        const int fd = std::atoi(entry->d_name);
        if (fd != dir_fd) fds.push_back(fd);
      }
      if (dir != nullptr) ::closedir(dir);
      std::sort(fds.begin(), fds.end());
      for (int fd : fds) line += " " + std::to_string(fd);
      Out(line);
    } else if (step == "env") {
      need(i, 1);
      const std::string name = args[++i];
      const char* value = std::getenv(name.c_str());
      Out(value != nullptr ? "env " + name + "=" + value : "env " + name + " unset");
    } else if (step == "sigstate") {
      FILE* f = std::fopen("/proc/self/status", "re");
      std::string blocked = "?", ignored = "?";
      char buf[256];
      while (f != nullptr && std::fgets(buf, sizeof buf, f) != nullptr) {
        std::string l(buf);
        if (l.back() == '\n') l.pop_back();
        if (l.rfind("SigBlk:", 0) == 0) blocked = l.substr(l.find_first_not_of(" \t", 7));
        if (l.rfind("SigIgn:", 0) == 0) ignored = l.substr(l.find_first_not_of(" \t", 7));
      }
      if (f != nullptr) std::fclose(f);
      Out("sigstate blocked=" + blocked + " ignored=" + ignored);
    } else if (step == "pgid") {
      Out("pgid " + std::to_string(::getpgrp()) + " pid " + std::to_string(::getpid()));
    } else if (step == "trap") {
      need(i, 3);
      Install(args[i + 1], args[i + 2], std::atoi(args[i + 3].c_str()));
      i += 3;
    } else if (step == "record") {
      need(i, 2);
      Install(args[i + 1], args[i + 2], -1);
      i += 2;
    } else if (step == "ignore") {
      need(i, 1);
      ::signal(SignalNumber(args[++i]), SIG_IGN);
    } else if (step == "fifo") {
      need(i, 2);
      const int fd = ::open(args[i + 1].c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) {
        std::perror("test_child: fifo");
        return 101;
      }
      const std::string text = args[i + 2] + "\n";
      WriteAll(fd, text.data(), text.size());
      ::close(fd);
      i += 2;
    } else if (step == "readfifo") {
      need(i, 1);
      const int fd = ::open(args[++i].c_str(), O_RDONLY | O_CLOEXEC);
      char buf[256];
      while (fd >= 0 && (::read(fd, buf, sizeof buf) > 0 || errno == EINTR)) {
      }
      if (fd >= 0) ::close(fd);
    } else if (step == "grandchild") {
      need(i, 1);
      const pid_t pid = ::fork();
      if (pid == 0) {
        for (;;) ::pause();
      }
      const std::string text = std::to_string(pid) + "\n";
      const std::string tmp = args[i + 1] + ".tmp";
      const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      WriteAll(fd, text.data(), text.size());
      ::close(fd);
      ::rename(tmp.c_str(), args[i + 1].c_str());
      ++i;
    } else if (step == "pidfile") {
      need(i, 1);
      const std::string text = std::to_string(::getpid()) + "\n";
      const std::string tmp = args[i + 1] + ".tmp";
      const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      WriteAll(fd, text.data(), text.size());
      ::close(fd);
      ::rename(tmp.c_str(), args[i + 1].c_str());
      ++i;
    } else if (step == "lines") {
      need(i, 3);
      const long n = std::atol(args[i + 1].c_str());
      const std::string payload(static_cast<size_t>(std::atol(args[i + 2].c_str())), 'x');
      const std::string& tag = args[i + 3];
      std::string buf;
      for (long k = 0; k < n; ++k) {
        buf += tag + " " + std::to_string(k) + " " + payload + "\n";
        if (buf.size() > 8192) {
          WriteAll(1, buf.data(), buf.size());
          buf.clear();
        }
      }
      WriteAll(1, buf.data(), buf.size());
      i += 3;
    } else if (step == "elines") {
      need(i, 2);
      const long n = std::atol(args[i + 1].c_str());
      for (long k = 0; k < n; ++k) {
        const std::string line = args[i + 2] + " " + std::to_string(k) + "\n";
        WriteAll(2, line.data(), line.size());
      }
      i += 2;
    } else if (step == "sleep") {
      need(i, 1);
      SleepSeconds(std::atof(args[++i].c_str()));
    } else if (step == "pause") {
      for (;;) ::pause();
    } else if (step == "exit") {
      need(i, 1);
      return std::atoi(args[++i].c_str());
    } else if (step == "kill") {
      need(i, 1);
      const int sig = SignalNumber(args[++i]);
      ::signal(sig, SIG_DFL);
      ::raise(sig);
    } else if (step == "stat") {
      need(i, 1);
      struct stat st {};
      Out(::stat(args[++i].c_str(), &st) == 0 ? "stat ok" : "stat failed");
    } else {
      std::fprintf(stderr, "test_child: unknown step '%s'\n", step.c_str());
      return 100;
    }
  }
  return 0;
}
