"""unused_functions.py ROOT BUILD GC_LOG: product functions nobody uses, and declarations nobody defines.

1. Unused functions.  GC_LOG is the linker's output for gculaunch linked again with every
   object of the product libraries and --gc-sections --print-gc-sections (the target
   gculaunch_gc_sections, launcher/app/CMakeLists.txt; the product is compiled with
   -ffunction-sections).  Every function of namespace gculaunch whose section the linker
   removed is one the executable never reaches.  It is a finding unless its name ends in
   ForTest, it is on the allow-list (unused_functions.allow: one name per line and why), or
   its own object uses it inlined (the debug information of that object has an inlined copy
   of it: a function with external linkage keeps its out-of-line body even when every call
   in its file was inlined).
2. Declarations without a definition.  Every function that a product header (base/,
   rendezvous/, etcd/, launcher/) declares without a body, and not as `= 0`, `= default`
   or `= delete`, must be defined in some object of the product libraries (nm): a
   declaration that nothing defines compiles as long as nobody calls it, and misleads every
   reader.

Prints one line per finding and exits 1 when there is one.
"""
import collections
import functools
import pathlib
import re
import subprocess
import sys

PRODUCT = ("base", "rendezvous", "etcd", "launcher")


def demangle(names):
    if not names:
        return []
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                         check=True).stdout
    return out.splitlines()


def qualified_name(demangled):
    """"gculaunch::Foo::Bar" of "void gculaunch::Foo::Bar<int>(int) const"; "" if none."""
    depth = 0
    end = len(demangled)
    for i, c in enumerate(demangled):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0 and not demangled[:i].endswith("operator"):
            end = i
            break
    head = demangled[:end]
    # A return type (templates only) ends at the last space outside angle brackets.
    depth = 0
    start = 0
    for i, c in enumerate(head):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == " " and depth == 0 and not head[:i].endswith("operator"):
            start = i + 1
    name = re.sub(r"\[abi:\w+\]", "", head[start:])
    return re.sub(r"<[^<>]*(<[^<>]*>[^<>]*)*>", "", name)


@functools.lru_cache(maxsize=None)
def inlined_symbols(obj):
    """The linkage names of the functions the debug information of `obj` has inlined copies of."""
    text = subprocess.run(["readelf", "--debug-dump=info", "--wide", obj], capture_output=True,
                          text=True, errors="replace").stdout
    dies = {}  # offset -> (tag, attributes)
    current = None
    for line in text.splitlines():
        m = re.match(r"\s*<\d+><([0-9a-f]+)>: Abbrev Number: \d+ \((\w+)\)", line)
        if m:
            current = int(m.group(1), 16)
            dies[current] = (m.group(2), {})
            continue
        m = re.match(r"\s*<[0-9a-f]+>\s+(DW_AT_\w+)\s*:\s*(.*)", line)
        if m and current is not None:
            dies[current][1][m.group(1)] = m.group(2)
    ref = re.compile(r"<0x([0-9a-f]+)>")

    def name_of(offset, seen=()):
        """The linkage name of a DIE, through its specification or abstract origin."""
        if offset in seen or offset not in dies:
            return ""
        attrs = dies[offset][1]
        for key in ("DW_AT_linkage_name", "DW_AT_MIPS_linkage_name"):
            if key in attrs:
                return attrs[key].split(":")[-1].strip()
        for key in ("DW_AT_specification", "DW_AT_abstract_origin"):
            m = ref.search(attrs.get(key, ""))
            if m:
                return name_of(int(m.group(1), 16), seen + (offset,))
        return ""

    names = set()
    for tag, attrs in dies.values():
        if tag == "DW_TAG_inlined_subroutine":
            m = ref.search(attrs.get("DW_AT_abstract_origin", ""))
            if m:
                names.add(name_of(int(m.group(1), 16)))
    return names


def inlined_in(obj, mangled):
    """Whether the debug information of `obj` has an inlined copy of function `mangled`."""
    return mangled in inlined_symbols(obj)


@functools.lru_cache(maxsize=None)
def global_functions(obj):
    """The mangled names of the functions `obj` defines with external, non-weak linkage: the
    ones written in a .cc file (inline and template functions are weak, static ones local)."""
    out = subprocess.run(["nm", "--defined-only", obj], capture_output=True, text=True).stdout
    return {line.split()[2] for line in out.splitlines()
            if len(line.split()) == 3 and line.split()[1] == "T"}


def special_member(name):
    """Constructors, destructors and assignments: the compiler's business, not a reader's."""
    parts = name.split("::")
    last = parts[-1]
    return last.startswith("~") or last.startswith("operator=") or (
        len(parts) >= 2 and last == parts[-2])


def unused_functions(gc_log, link_dir, allowed):
    removed = re.compile(r"removing unused section '\.text\.([^']+)' in file '([^']+)'")
    found = []
    for line in pathlib.Path(gc_log).read_text(errors="replace").splitlines():
        m = removed.search(line)
        if not m or "CMakeFiles/gculaunch_" not in m.group(2):
            continue
        symbol = m.group(1)
        if symbol.startswith(("unlikely.", "startup.", "hot.", "exit.")):
            continue  # a cold part of a function, reported with its function
        obj = str((link_dir / m.group(2)).resolve())
        if symbol in global_functions(obj):
            found.append((symbol, obj))
    bad = []
    seen = set()
    for (symbol, obj), demangled in zip(found, demangle([s for s, _ in found])):
        name = qualified_name(demangled)
        if not name.startswith("gculaunch::") or special_member(name):
            continue
        if name.endswith("ForTest") or name in allowed or demangled in allowed:
            continue
        if demangled in seen or inlined_in(obj, symbol):
            continue  # an inlined copy: used in its own file
        seen.add(demangled)
        bad.append("%s: the executable never uses it (%s); delete it, call it ...ForTest if only "
                   "the tests use it, or add it to tests/checks/unused_functions.allow with why"
                   % (demangled, pathlib.Path(obj).name.replace(".o", "")))
    return bad


# ---- declarations without a definition ----

def strip_comments_and_strings(text):
    """`text` without comments, literals and preprocessor lines; the line breaks stay."""
    keep_lines = lambda m: "\n" * m.group(0).count("\n")
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", keep_lines, text, flags=re.S)
    text = re.sub(r'R"(\w*)\(.*?\)\1"', lambda m: '""' + keep_lines(m), text, flags=re.S)
    text = re.sub(r'"(?:[^"\\\n]|\\.)*"', '""', text)
    text = re.sub(r"'(?:[^'\\\n]|\\.)*'", "''", text)
    return re.sub(r"^[ \t]*#[^\n]*", "", text, flags=re.M)


SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b\s*(?:class\s+)?([\w:]*)")


def declarations(header):
    """[(qualified name, line)] of the functions `header` declares without a body."""
    text = strip_comments_and_strings(header.read_text())
    result = []
    scopes = []  # (kind, name) per open brace: namespace, class, or "body" (skipped)
    statement_start = 0
    i = 0
    while i < len(text):
        c = text[i]
        if c in "{};":
            statement = text[statement_start:i]
            inside_body = any(kind == "body" for kind, _ in scopes)
            if c == "{":
                m = SCOPE.search(statement)
                if inside_body or "(" in statement.split("=")[0] and not m:
                    scopes.append(("body", ""))
                elif m and m.group(1) == "namespace":
                    scopes.append(("namespace", m.group(2)))
                elif m and m.group(1) in ("class", "struct", "union"):
                    scopes.append(("class", m.group(2)))
                else:
                    scopes.append(("body", ""))  # an initializer, an enum's list, ...
            elif c == "}":
                if scopes:
                    scopes.pop()
            elif c == ";" and not inside_body:
                name = declared_function(statement)
                if name:
                    prefix = [n for kind, n in scopes if n]
                    line = text.count("\n", 0, i) + 1
                    result.append(("::".join(prefix + [name]), line))
            statement_start = i + 1
        i += 1
    return result


def declared_function(statement):
    """The function `statement` declares (without a body), or ""."""
    s = " ".join(statement.split())
    s = re.sub(r"^(public|private|protected)\s*:\s*", "", s)
    if not s or re.match(r"(friend|typedef|using|static_assert|template)\b", s):
        return ""
    if re.search(r"=\s*(0|default|delete)\s*$", s) or "operator" in s:
        return ""
    depth = 0
    for i, ch in enumerate(s):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "=" and depth == 0:
            return ""  # a variable with an initializer
        elif ch == "(" and depth == 0:
            m = re.search(r"(~?[A-Za-z_]\w*)\s*$", s[:i])
            if not m or m.group(1) in ("decltype", "alignas", "noexcept", "sizeof"):
                return ""
            return m.group(1)
    return ""


def defined_names(objects):
    out = subprocess.run(["nm", "--defined-only", "-C"] + objects, capture_output=True,
                         text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "TtWwiu":
            name = qualified_name(parts[2])
            names.add(name)
            # "gculaunch::X::X" for a constructor of gculaunch::X
    return names


def undefined_declarations(root, objects):
    defined = defined_names(objects)
    short = {n.split("::")[-1] for n in defined}
    bad = []
    for top in PRODUCT:
        for header in sorted((root / top).rglob("*.h")):
            for name, line in declarations(header):
                if name in defined:
                    continue
                # Declared in a namespace the parser did not see whole (a nested name): the
                # short name must then be defined somewhere at least.
                if name.split("::")[-1] in short and not name.startswith("gculaunch"):
                    continue
                bad.append("%s:%d: %s is declared but defined nowhere; define it or delete the "
                           "declaration" % (header.relative_to(root), line, name))
    return bad


def main():
    root = pathlib.Path(sys.argv[1])
    build = pathlib.Path(sys.argv[2])
    gc_log = sys.argv[3]
    allow_file = root / "tests/checks/unused_functions.allow"
    allowed = set()
    for line in allow_file.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            allowed.add(line.split()[0])
    objects = sorted(str(p) for p in build.rglob("*.o")
                     if re.search(r"/CMakeFiles/gculaunch_(base|codec|rendezvous|etcd|frontend|sys|"
                                  r"run|ops|cluster|check|app)\.dir/", str(p)))
    if not objects:
        print("unused_functions: no object of the product libraries under %s" % build)
        return 1
    link_dir = build / "launcher/app"  # where the linker ran: its object paths are relative to it
    bad = unused_functions(gc_log, link_dir, allowed) + undefined_declarations(root, objects)
    for line in bad:
        print(line)
    print("unused_functions: %d objects, %d findings" % (len(objects), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
