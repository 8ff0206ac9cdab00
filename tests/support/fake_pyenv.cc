#include "tests/support/fake_pyenv.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>

namespace gculaunch::testing {
namespace {

// pyenv exec's plain case (pyenv-exec, pyenv-version-name, pyenv-version-file, -read).
constexpr char kLibexecPyenv[] = R"SH(#!/bin/bash
set -e
[ "$1" = exec ] || { echo "fake pyenv: only exec" >&2; exit 2; }
shift
program=$1
shift
version=${PYENV_VERSION:-}
if [ -z "$version" ]; then
  dir=$PWD
  while :; do
    if [ -f "$dir/.python-version" ]; then read -r version _ < "$dir/.python-version"; break; fi
    [ -n "$dir" ] || break
    dir=${dir%/*}
  done
fi
if [ -z "$version" ] && [ -f "$PYENV_ROOT/version" ]; then read -r version _ < "$PYENV_ROOT/version"; fi
export PYENV_VERSION=$version
export PATH="$PYENV_ROOT/versions/$version/bin:$PATH"
exec "$PYENV_ROOT/versions/$version/bin/$program" "$@"
)SH";

void Executable(const std::string& path) {
  if (::chmod(path.c_str(), 0755) != 0) throw std::runtime_error("chmod " + path);
}

}  // namespace

FakePyenv::FakePyenv(const TempDir& dir, const std::string& global, const std::string& python)
    : root_(dir.File("pyenv")), python_(python) {
  Executable(dir.Write("pyenv/libexec/pyenv", kLibexecPyenv));
  Executable(dir.Write("pyenv/shims/python3",
                       "#!/usr/bin/env bash\nset -e\n[ -n \"$PYENV_DEBUG\" ] && set -x\n\n"
                       "program=\"${0##*/}\"\n\nexport PYENV_ROOT=\"" +
                           root_ + "\"\nexec \"" + root_ +
                           "/libexec/pyenv\" exec \"$program\" \"$@\"\n"));
  dir.Write("pyenv/version", global + "\n");
  Install(global);
}

std::string FakePyenv::Install(const std::string& version) const {
  const std::string bin = root_ + "/versions/" + version + "/bin";
  std::filesystem::create_directories(bin);
  const std::string link = bin + "/python3";
  if (::symlink(python_.c_str(), link.c_str()) != 0) throw std::runtime_error("symlink " + link);
  return link;
}

}  // namespace gculaunch::testing
