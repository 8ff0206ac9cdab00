#include "launcher/sys/python_files.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <optional>

#include "base/text.h"
#include "launcher/sys/safe_files.h"
#include "launcher/sys/unique_fd.h"

namespace gculaunch::sys {
namespace {

constexpr size_t kMaxShimBytes = 64 * 1024;  // pyenv's and asdf's shims are a few hundred bytes

std::string RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) return "";
  return resolved;
}

std::string Directory(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string BaseName(const std::string& path) { return path.substr(path.rfind('/') + 1); }

bool IsDir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// The directory `dir` and every one above it, nearest first ("/a/b" -> /a/b, /a, /).
std::vector<std::string> UpFrom(std::string dir) {
  std::vector<std::string> dirs;
  while (!dir.empty()) {
    dirs.push_back(dir);
    if (dir == "/") break;
    dir = Directory(dir);
  }
  return dirs;
}

std::string Joined(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

// The text between the quotes of `"..."` at the start of `text`; nullopt without them.
std::optional<std::string> Quoted(std::string_view text) {
  if (text.empty() || text.front() != '"') return std::nullopt;
  const size_t close = text.find('"', 1);
  if (close == std::string_view::npos) return std::nullopt;
  return std::string(text.substr(1, close - 1));
}

// pyenv's shim: `export PYENV_ROOT="<root>"` and `exec "<root>/libexec/pyenv" exec
// "$program" "$@"` (pyenv-rehash writes it so).
std::optional<Shim> PyenvShim(const std::vector<std::string>& lines) {
  std::optional<std::string> root;
  bool execs = false;
  for (const std::string& raw : lines) {
    const std::string line = Trim(raw);
    if (line.rfind("export PYENV_ROOT=", 0) == 0) {
      root = Quoted(std::string_view(line).substr(18));
    } else if (line.rfind("exec \"", 0) == 0 &&
               line.find("/libexec/pyenv\" exec \"$program\" \"$@\"") != std::string::npos) {
      execs = true;
    }
  }
  if (!root || !execs || root->empty() || root->front() != '/') return std::nullopt;
  return Shim{"pyenv", *root};
}

// The first word of each non-comment line of a pyenv version file (pyenv-version-file-read).
std::vector<std::string> VersionFileWords(const std::string& text) {
  std::vector<std::string> words;
  for (std::string line : Split(text, '\n')) {
    for (char& c : line) {
      if (c == '\r' || c == '\t') c = ' ';
    }
    line = Trim(line);
    if (line.empty() || line.front() == '#') continue;
    words.push_back(line.substr(0, line.find(' ')));
  }
  return words;
}

// PYENV_VERSION as `pyenv exec` would compute it before resolving: the variable, else the
// nearest .python-version, else <root>/version; `from` names the source.
std::optional<std::string> PyenvVersionName(const Shim& shim, const EnvMap& env,
                                            const std::string& cwd, std::string& from,
                                            std::string* why) {
  if (std::string named = env.GetOr("PYENV_VERSION", ""); !named.empty()) {
    from = "PYENV_VERSION";
    return named;
  }
  std::string file;
  for (const std::string& dir : UpFrom(cwd)) {
    if (IsFile(Joined(dir, ".python-version"))) {
      file = Joined(dir, ".python-version");
      break;
    }
  }
  if (file.empty()) file = shim.pyenv_root + "/version";
  from = file;
  auto text = ReadBoundedFile(file, 4096);
  if (!text.ok()) {
    if (why != nullptr) *why = "no version file (pyenv runs its system Python)";
    return std::nullopt;
  }
  const std::vector<std::string> words = VersionFileWords(*text);
  if (words.empty()) {
    if (why != nullptr) *why = file + " names no version";
    return std::nullopt;
  }
  return Join(words, ":");
}

// ---- the torch the rank would import ----

// "3.11" for an interpreter binary named python3.11; empty otherwise.
std::string VersionOfName(const std::string& name) {
  const std::string prefix = "python";
  if (name.rfind(prefix, 0) != 0) return "";
  std::string rest = name.substr(prefix.size());
  const size_t dot = rest.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == rest.size()) return "";
  for (size_t i = 0; i < rest.size(); ++i) {
    if (i != dot && std::isdigit(static_cast<unsigned char>(rest[i])) == 0) return "";
  }
  return rest;
}

bool IsElf(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  char magic[4] = {};
  return fd.valid() && ::read(fd.get(), magic, 4) == 4 && magic[0] == 0x7f && magic[1] == 'E' &&
         magic[2] == 'L' && magic[3] == 'F';
}

// A venv's pyvenv.cfg: Python looks beside the executable (as named, not resolved) and one
// directory up.  Its directory is the venv's prefix; `system_site` its
// include-system-site-packages.
struct Venv {
  std::string prefix;
  bool system_site = false;
};

std::optional<Venv> FindVenv(const std::string& python) {
  for (const std::string& dir : {Directory(python), Directory(Directory(python))}) {
    auto text = ReadBoundedFile(Joined(dir, "pyvenv.cfg"), 64 * 1024);
    if (!text.ok()) continue;
    Venv venv{dir, false};
    for (const std::string& raw : Split(*text, '\n')) {
      const size_t eq = raw.find('=');
      if (eq == std::string::npos || Trim(raw.substr(0, eq)) != "include-system-site-packages") {
        continue;
      }
      std::string value = Trim(raw.substr(eq + 1));
      for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      venv.system_site = value == "true";
    }
    return venv;
  }
  return std::nullopt;
}

// The site directories of one prefix, in site.getsitepackages()'s order: Debian's patched
// site.py (dist-packages) or the upstream one.
void AddSiteDirs(const std::string& prefix, const std::string& version, bool debian, bool venv,
                 std::vector<std::string>& path) {
  const std::string lib = prefix + "/lib/python" + version;
  if (!debian) {
    path.push_back(lib + "/site-packages");
    return;
  }
  if (venv) path.push_back(lib + "/site-packages");
  path.push_back(prefix + "/local/lib/python" + version + "/dist-packages");
  path.push_back(prefix + "/lib/python3/dist-packages");
  path.push_back(lib + "/dist-packages");
}

// sys.path[0] and PYTHONPATH, as the rank's interpreter puts them first.
void AddFirstEntries(const std::string& mode, const std::string& where, const EnvMap& env,
                     const std::string& cwd, std::vector<std::string>& path) {
  if (env.GetOr("PYTHONSAFEPATH", "").empty()) {
    if (mode == "script") {
      const std::string script =
          !where.empty() && where.front() == '/' ? where : Joined(cwd, where);
      path.push_back(
          IsDir(script) ? script : Directory(RealPath(script).empty() ? script : RealPath(script)));
    } else {
      path.push_back(cwd);
    }
  }
  for (const std::string& entry : Split(env.GetOr("PYTHONPATH", ""), ':')) {
    if (entry.empty()) continue;
    path.push_back(entry.front() == '/' ? entry : Joined(cwd, entry));
  }
}

RanksTorch Unknown(const std::string& why) {
  RanksTorch torch;
  torch.state = RanksTorch::State::kUnknown;
  torch.how = why + "; not known without running the interpreter";
  return torch;
}

// The answer of one search path entry: kFound, kUnknown (a torch that is not a plain
// package), or nullopt (no torch here).
std::optional<RanksTorch> TorchIn(const std::string& entry, const std::string& python) {
  struct stat st {};
  if (::stat(entry.c_str(), &st) != 0) return std::nullopt;
  if (!S_ISDIR(st.st_mode)) return Unknown(entry + " on the search path is not a directory");
  const std::string package = Joined(entry, "torch");
  if (IsFile(package + "/__init__.py")) {
    auto text = ReadBoundedFile(package + "/version.py", 64 * 1024);
    std::optional<std::string> version;
    if (text.ok()) version = ParseTorchVersionFile(*text);
    if (!version) return Unknown("no __version__ in " + package + "/version.py");
    RanksTorch torch;
    torch.state = RanksTorch::State::kFound;
    torch.version = *version;
    torch.how = "read from " + package + "/version.py, without running " + python;
    return torch;
  }
  for (const char* suffix : {"", ".py", ".pyc", ".so", ".abi3.so"}) {
    if (Exists(package + suffix)) return Unknown(package + suffix + " is not a plain package");
  }
  return std::nullopt;
}

}  // namespace

std::optional<Shim> ReadShim(const std::string& path) {
  auto text = ReadBoundedFile(path, kMaxShimBytes);
  if (!text.ok() || text->rfind("#!", 0) != 0) return std::nullopt;
  const std::vector<std::string> lines = Split(*text, '\n');
  if (auto pyenv = PyenvShim(lines)) return pyenv;
  // asdf: `exec /home/u/.asdf/bin/asdf exec "python3" "$@"` (0.x), `exec asdf exec ...`.
  for (const std::string& raw : lines) {
    const std::string line = Trim(raw);
    if (line.rfind("exec ", 0) == 0 && line.find("asdf exec ") != std::string::npos) {
      return Shim{"asdf", ""};
    }
  }
  return std::nullopt;
}

std::vector<std::string> ShimSelectionFiles(const Shim& shim, const EnvMap& env,
                                            const std::string& cwd) {
  const bool pyenv = shim.kind == "pyenv";
  std::string name = ".python-version";
  if (!pyenv) name = env.GetOr("ASDF_DEFAULT_TOOL_VERSIONS_FILENAME", ".tool-versions");
  std::vector<std::string> files;
  for (const std::string& dir : UpFrom(cwd)) files.push_back(Joined(dir, name));
  if (pyenv) {
    files.push_back(shim.pyenv_root + "/version");
  } else if (std::string home = env.GetOr("HOME", ""); !home.empty()) {
    files.push_back(Joined(home, name));
  }
  return files;
}

std::optional<ShimChoice> ReadPyenvChoice(const std::string& shim_path, const Shim& shim,
                                          const EnvMap& env, const std::string& cwd,
                                          std::string* why) {
  auto fail = [why](std::string reason) -> std::optional<ShimChoice> {
    if (why != nullptr) *why = std::move(reason);
    return std::nullopt;
  };
  if (shim.kind != "pyenv") return fail("not a pyenv shim");
  if (!env.GetOr("PYENV_DIR", "").empty()) return fail("PYENV_DIR is set");
  std::string from;
  std::optional<std::string> name = PyenvVersionName(shim, env, cwd, from, why);
  if (!name) return std::nullopt;
  if (name->find(':') != std::string::npos) return fail("several versions (" + *name + ")");
  if (*name == "system") return fail("the system version");
  if (*name == ".." || name->find('/') != std::string::npos) return fail("version " + *name);
  std::string version = *name;
  if (!IsDir(shim.pyenv_root + "/versions/" + version) && version.rfind("python-", 0) == 0) {
    version = version.substr(7);  // pyenv drops an explicit "python-"
  }
  const std::string prefix = shim.pyenv_root + "/versions/" + version;
  if (!IsDir(prefix)) return fail("version " + *name + " is not installed under that name");
  if (Exists(prefix + "/conda-meta")) return fail("a conda environment (pyenv's hooks decide)");
  const std::string program = prefix + "/bin/" + BaseName(shim_path);
  if (!IsFile(program) || ::access(program.c_str(), X_OK) != 0) {
    return fail(program + " is not an executable file");
  }
  ShimChoice choice;
  choice.shim = shim_path;
  choice.kind = "pyenv";
  choice.interpreter = program;
  choice.pyenv_version = version;
  choice.how = "pyenv, version " + version + " from " + from + ", read without running the shim";
  return choice;
}

RanksTorch ReadRanksTorch(const std::string& python, const std::string& mode,
                          const std::string& where, const EnvMap& env, const std::string& cwd) {
  for (const char* var : {"PYTHONHOME", "PYTHONPLATLIBDIR"}) {
    if (!env.GetOr(var, "").empty()) return Unknown(std::string(var) + " is set");
  }
  const std::string real = RealPath(python);
  const std::string version = VersionOfName(BaseName(real));
  if (real.empty() || version.empty() || !IsElf(real)) {
    return Unknown(python + " is not a Python binary named pythonX.Y");
  }
  const std::string base = Directory(Directory(real));
  const std::string stdlib = base + "/lib/python" + version;
  if (!IsFile(stdlib + "/os.py")) return Unknown("no standard library at " + stdlib);
  auto site_py = ReadBoundedFile(stdlib + "/site.py");
  const bool debian = site_py.ok() && site_py->find("dist-packages") != std::string::npos;
  const std::optional<Venv> venv = FindVenv(python);

  std::vector<std::string> path;
  AddFirstEntries(mode, where, env, cwd, path);
  std::string nodot = version;
  nodot.erase(nodot.find('.'), 1);
  path.push_back(base + "/lib/python" + nodot + ".zip");
  path.push_back(stdlib);
  path.push_back(stdlib + "/lib-dynload");
  // The user's site-packages comes before the site directories; a venv without the system's
  // site-packages turns it off, as does PYTHONNOUSERSITE.
  const bool system_site = !venv || venv->system_site;
  if (system_site && env.GetOr("PYTHONNOUSERSITE", "").empty()) {
    std::string user_base = env.GetOr("PYTHONUSERBASE", "");
    if (user_base.empty() && !env.GetOr("HOME", "").empty())
      user_base = env.GetOr("HOME", "") + "/.local";
    if (!user_base.empty()) path.push_back(user_base + "/lib/python" + version + "/site-packages");
  }
  if (venv) AddSiteDirs(venv->prefix, version, debian, true, path);
  if (system_site) AddSiteDirs(base, version, debian, venv.has_value(), path);
  for (const std::string& entry : path) {
    if (std::optional<RanksTorch> torch = TorchIn(entry, python)) return *torch;
  }
  return Unknown("no torch package on the search path " + python +
                 "'s files give (a .pth file "
                 "could still add one)");
}

}  // namespace gculaunch::sys
