#include "launcher/sys/spawner.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/process/v2/posix/default_launcher.hpp>
#include <boost/process/v2/process.hpp>
#include <cerrno>
#include <cstring>
#include <exception>

#include "base/exit_codes.h"
#include "launcher/sys/child_setup.h"
#include "launcher/sys/process_group.h"
#include "launcher/sys/unique_fd.h"

namespace gculaunch::sys {

namespace bp = boost::process::v2;

namespace {

// The Boost.Process initializer: its on_exec_setup runs in the child.
struct ChildSetupInit {
  ChildSetupParams params;

  bp::error_code on_exec_setup(bp::posix::default_launcher& /*launcher*/,
                               const bp::filesystem::path& /*executable*/,
                               const char* const* /*argv*/) const {
    const int err = RunChildSetup(params);
    return err == 0 ? bp::error_code{} : bp::error_code(err, bp::system_category());
  }
};

std::string ExecErrorHint(int err) {
  switch (err) {
    case ENOENT:
      return "check the path, or put the program on PATH";
    case EACCES:
      return "make it executable (chmod +x) or run it through an interpreter";
    case ENOEXEC:
      return "add a #! line, or drop --no-python so that python runs it";
    case EMFILE:
    case ENFILE:
      return "raise the open-file limit (ulimit -n), or start fewer ranks";
    case EAGAIN:
      return "raise the process limit (ulimit -u, or the container's pids limit)";
    case ENOMEM:
      return "free memory, or start fewer ranks";
    default:
      return "";
  }
}

}  // namespace

struct Spawner::Impl {
  // Never run; owns no sockets.  Boost.Process needs an executor only to
  // construct the (immediately detached) process object.
  boost::asio::io_context spawn_io;
};

Spawner::Spawner() : impl_(std::make_unique<Impl>()) {}
Spawner::~Spawner() = default;

Result<pid_t> Spawner::Spawn(const SpawnRequest& request, SpawnError* failure) {
  auto fail = [&](Error error, int err) -> Result<pid_t> {
    if (failure != nullptr) *failure = SpawnError{error, err};
    return error;
  };
  if (request.argv.empty()) return fail(Error{"empty command line", ""}, EINVAL);

  std::vector<const char*> argv;
  argv.reserve(request.argv.size() + 1);
  for (const std::string& arg : request.argv) argv.push_back(arg.c_str());
  argv.push_back(nullptr);
  std::vector<const char*> envp;
  envp.reserve(request.env.size() + 1);
  for (const std::string& var : request.env) envp.push_back(var.c_str());
  envp.push_back(nullptr);

  ChildSetupInit init{ChildSetupParams{::getpid(), request.stdin_fd, request.stdout_fd,
                                       request.stderr_fd, request.take_terminal}};
  init.params.open_files = child_open_files_;
  if (request.priority) {
    init.params.set_priority = true;
    init.params.nice = request.priority->nice;
    init.params.policy = request.priority->policy;
  }
  if (!request.cpus.empty()) {
    init.params.pin_cpus = true;
    CPU_ZERO(&init.params.cpus);
    for (int cpu : request.cpus) {
      if (cpu < 0 || cpu >= CPU_SETSIZE) {
        return fail(Error{"CPU " + std::to_string(cpu) + " is out of range for affinity",
                          "use --cpu-affinity none"},
                    EINVAL);
      }
      CPU_SET(cpu, &init.params.cpus);
    }
  }
  bp::posix::default_launcher launcher;
  launcher.env = envp.data();
  bp::error_code ec;
  try {
    // The (executor, error_code&, ...) overload: the (context, ec, ...) one
    // drops `ec` and throws.  A `const char**` argv is passed through verbatim.
    auto process = launcher(impl_->spawn_io.get_executor(), ec,
                            bp::filesystem::path(request.program), argv.data(), init);
    if (!ec) {
      const pid_t pid = process.id();
      process.detach();  // its destructor would kill the pid; the caller reaps the child
      return pid;
    }
  } catch (const std::exception&) {
    // Only allocation can throw on this path; report it as a failed start.
    if (!ec) ec = bp::error_code(ENOMEM, bp::system_category());
  }
  // A child that forked but could not exec wrote its errno and is exiting;
  // make sure it is gone and reaped.
  if (launcher.pid > 0) {
    // False only when it is already gone (ESRCH); it is reaped below either way.
    SignalProcess(launcher.pid, SIGKILL);
    int status = 0;
    while (::waitpid(launcher.pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  const int err = ec.value();
  // As the shell says: found but not runnable 126, else (not found, bad #! interpreter) 127.
  // Out of descriptors, processes or memory is none of those: the launch's own exit code.
  const bool not_runnable = err == EACCES || err == ENOEXEC || err == EPERM || err == EISDIR;
  const bool resources = err == EMFILE || err == ENFILE || err == EAGAIN || err == ENOMEM;
  return fail(
      Error{"cannot start '" + request.program + "': " + std::strerror(err), ExecErrorHint(err),
            resources      ? exit_code::kNoResources
            : not_runnable ? 126
                           : 127},
      err);
}

Result<std::string> ResolveProgram(const std::string& name, const std::string& path_env) {
  auto check = [](const std::string& path, int* err) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      *err = errno;
      return false;
    }
    if (!S_ISREG(st.st_mode)) {
      *err = S_ISDIR(st.st_mode) ? EISDIR : EACCES;
      return false;
    }
    if (::access(path.c_str(), X_OK) != 0) {
      *err = errno;
      return false;
    }
    return true;
  };
  if (name.empty()) return Error{"the rank program is empty", "name a script or program"};
  int err = 0;
  if (name.find('/') != std::string::npos) {
    if (check(name, &err)) return name;
    if (err == ENOENT) {
      return Error{"rank program '" + name + "' was not found", "check the path"};
    }
    return Error{"rank program '" + name + "' cannot be executed: " + std::strerror(err),
                 err == EACCES ? "make it executable (chmod +x)" : ""};
  }
  int first_err = ENOENT;
  size_t start = 0;
  for (;;) {
    const size_t colon = path_env.find(':', start);
    std::string dir =
        path_env.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + name;
    if (check(candidate, &err)) return candidate;
    if (err != ENOENT && err != ENOTDIR && first_err == ENOENT) first_err = err;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (first_err == ENOENT) {
    return Error{"rank program '" + name + "' was not found on PATH",
                 "install it, give its full path, or fix PATH"};
  }
  return Error{"rank program '" + name +
                   "' was found on PATH but cannot be executed: " + std::strerror(first_err),
               "make it executable (chmod +x)"};
}

}  // namespace gculaunch::sys
