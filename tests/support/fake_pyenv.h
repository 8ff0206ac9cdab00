// FakePyenv: a pyenv installation in a test's temporary directory, so that no test depends on
// a real pyenv.  Its shim is pyenv's own form (`export PYENV_ROOT=...`, `exec
// "<root>/libexec/pyenv" exec "$program" "$@"`), and its libexec/pyenv does what `pyenv exec`
// does in the plain case: PYENV_VERSION, else the nearest .python-version, else <root>/version;
// it exports PYENV_VERSION and puts the version's bin/ first on PATH, then execs it.  Each
// version is a symbolic link to a real interpreter (Debian's /usr/bin/python3 in CI).
//
// Thread safety: test-only; one thread.
#pragma once

#include <string>

#include "tests/support/test_util.h"

namespace gculaunch::testing {

class FakePyenv {
 public:
  /// Makes <dir>/pyenv with the shim shims/python3 and the global version `global`.
  FakePyenv(const TempDir& dir, const std::string& global, const std::string& python);
  /// Installs `version`: versions/<version>/bin/python3, a link to the interpreter.
  std::string Install(const std::string& version) const;
  const std::string& root() const { return root_; }
  std::string shim() const { return root_ + "/shims/python3"; }
  std::string interpreter(const std::string& version) const {
    return root_ + "/versions/" + version + "/bin/python3";
  }

 private:
  std::string root_;
  std::string python_;
};

}  // namespace gculaunch::testing
