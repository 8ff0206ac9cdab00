"""architecture_map.py ROOT [DOC]: docs/architecture.md agrees with cmake/layers.cmake and the code.

Two places in the document name, for each layer, the project layers it may use:
  * the picture: the "uses (besides base)" column ("every layer" for app), base implied;
  * the table of "The layers": the "may include (project)" column ("-" for none).
Both must list exactly what the layer's GCULAUNCH_LAYER_ALLOW_<layer> row of
cmake/layers.cmake allows, and both must name every layer of that file.

The table's "what it holds" column is held to the code too (a file's layer is the one
gculaunch_layer_of_path in cmake/layers.cmake gives it):
  * every header of the layer is named there, by its file name without ".h" or by a name it
    declares (a class, struct, enum, alias or function), in backticks;
  * every name in backticks there is such a file or name of that layer.

And the rendezvous backends stay closed: outside the front end, the backends' folders
(launcher/cluster/<backend>/), the check layer and the backends' table, no .h or .cc file of
base/, rendezvous/ or launcher/ names a backend other than the built-in store (BACKEND_NAMES).

Prints one line per disagreement and exits 1 when there is one.
"""
import pathlib
import re
import sys

EXTERNAL = {"std", "posix", "asio", "process", "beast", "openssl", "boost", "spdlog", "yaml",
            "cli11", "json", "catch2"}


def layer_rules(text):
    """{layer: set of project layers it may include, itself left out} (the tests row too)."""
    rules = {}
    for m in re.finditer(r"set\(GCULAUNCH_LAYER_ALLOW_(\w+)\s+([^)]*)\)", text):
        layer, allowed = m.group(1), set(m.group(2).split())
        if layer != "tests":
            rules[layer] = allowed - EXTERNAL - {layer}
    return rules


def picture_uses(doc, layers):
    """{layer: set} from the picture's rows (a layer's row may continue on the next line)."""
    block = doc.split("```")[1]
    header = next(line for line in block.splitlines() if "uses (besides base)" in line)
    column = header.index("uses (besides base)")
    uses, current = {}, None
    for line in block.splitlines():
        m = re.match(r"  ([a-z_]+)\s+", line)
        if m and m.group(1) in layers:
            current = m.group(1)
            uses[current] = set()
        elif not line.startswith("  ") or current is None:
            continue
        for word in re.findall(r"[a-z_]+", line[column:]):
            uses[current].add(word)
    result = {}
    for layer, words in uses.items():
        if words >= {"every", "layer"}:
            result[layer] = set(layers) - {layer}
        else:
            result[layer] = (words | ({"base"} if layer != "base" else set())) - {layer}
    return result


def table_uses(doc):
    """{layer: set} from the "may include (project)" column of the table of layers."""
    result = {}
    section = doc.split("## The layers", 1)[1]
    for line in section.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) < 7 or not re.fullmatch(r"[a-z_]+", cells[1]) or cells[1] == "layer":
            continue
        names = set(re.findall(r"[a-z_]+", cells[5]))
        result[cells[1]] = names
    return result


def table_holds(doc):
    """{layer: the "what it holds" cell} from the table of layers."""
    result = {}
    section = doc.split("## The layers", 1)[1]
    for line in section.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) < 7 or not re.fullmatch(r"[a-z_]+", cells[1]) or cells[1] == "layer":
            continue
        result[cells[1]] = cells[4]
    return result


def path_rules(text):
    """[(compiled regex, layer or None for "the first group")] of gculaunch_layer_of_path."""
    body = text.split("function(gculaunch_layer_of_path", 1)[1].split("endfunction()", 1)[0]
    rules = []
    for m in re.finditer(r'path MATCHES "([^"]+)"\)\s*set\(layer ([^)]+)\)', body):
        regex = m.group(1).replace("\\\\", "\\")
        layer = m.group(2).strip()
        rules.append((re.compile(regex), None if layer.startswith("${") else layer))
    return rules


def layer_of(rel, rules):
    for regex, layer in rules:
        m = regex.search(rel)
        if m:
            return layer if layer is not None else m.group(1)
    return ""


DECLARED = re.compile(
    r"\b(?:class|struct|enum(?:\s+class)?|using|namespace)\s+([A-Za-z_]\w*)|"
    r"\b([A-Za-z_]\w*)\s*\(")


def headers_by_layer(root, rules):
    """{layer: {header stem: set of names it declares}} over base/, rendezvous/, etcd/ and
    launcher/."""
    result = {}
    for top in ("base", "rendezvous", "etcd", "launcher"):
        for path in sorted((root / top).rglob("*.h")):
            rel = path.relative_to(root).as_posix()
            layer = layer_of(rel, rules)
            names = set()
            for m in DECLARED.finditer(path.read_text()):
                names.add(m.group(1) or m.group(2))
            result.setdefault(layer, {})[path.stem] = names
    return result


def check_holds(doc_name, doc, root, rules, layers):
    """Lines for each header a layer's "what it holds" cell leaves out, and each name it
    gives that the layer does not have."""
    bad = []
    holds = table_holds(doc)
    headers = headers_by_layer(root, rules)
    for layer in sorted(layers):
        cell = holds.get(layer)
        if cell is None:
            continue  # reported as a missing row already
        named = {n.split("::")[-1].rstrip("()") for n in re.findall(r"`([^`]+)`", cell)
                 if re.fullmatch(r"[A-Za-z_][\w:]*(\(\))?", n)}
        files = headers.get(layer, {})
        known = set(files) | set().union(*files.values()) if files else set()
        for stem, names in sorted(files.items()):
            if stem not in named and not (names & named):
                bad.append("%s: the table's \"what it holds\" for %s does not name %s.h (by `%s` "
                           "or a name it declares)" % (doc_name, layer, stem, stem))
        for name in sorted(named - known):
            bad.append("%s: the table's \"what it holds\" for %s names `%s`, which no header of "
                       "that layer declares" % (doc_name, layer, name))
    return bad


# Backends other than the built-in store, and the files outside their folders that may name
# them: the front end, the check layer, the backends' table, and `gculaunch check`'s entry point,
# which hands the check layer a backend's client options.
BACKEND_NAMES = ("etcd",)
BACKEND_TABLE = {"launcher/cluster/rdzv_backends.h", "launcher/cluster/rdzv_backends.cc",
                 "launcher/app/check_main.cc"}


def check_backend_names(root):
    bad = []
    for top in ("base", "rendezvous", "launcher"):
        for path in sorted((root / top).rglob("*")):
            rel = path.relative_to(root).as_posix()
            if path.suffix not in (".h", ".cc") or rel in BACKEND_TABLE:
                continue
            if re.match(r"launcher/(frontend|check)/", rel):
                continue
            if any(rel.startswith("launcher/cluster/%s/" % b) for b in BACKEND_NAMES):
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                for backend in BACKEND_NAMES:
                    if backend in line.lower():
                        bad.append("%s:%d: names the %s backend outside its folder "
                                   "(launcher/cluster/%s/) and the backends' table "
                                   "(launcher/cluster/rdzv_backends.h): ask its capabilities "
                                   "(launcher/frontend/rdzv_backend.h) instead" % (rel, number, backend, backend))
    return bad


def main():
    root = pathlib.Path(sys.argv[1])
    doc_path = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else root / "docs/architecture.md"
    rules = layer_rules((root / "cmake/layers.cmake").read_text())
    doc = doc_path.read_text()
    bad = 0
    for where, uses in (("the picture", picture_uses(doc, rules)), ("the table", table_uses(doc))):
        for layer in sorted(rules):
            if layer not in uses:
                print("%s: %s has no row for layer %s" % (doc_path.name, where, layer))
                bad += 1
                continue
            if uses[layer] != rules[layer]:
                print("%s: %s says %s uses %s; cmake/layers.cmake allows %s"
                      % (doc_path.name, where, layer, ", ".join(sorted(uses[layer])) or "nothing",
                         ", ".join(sorted(rules[layer])) or "nothing"))
                bad += 1
        for layer in sorted(set(uses) - set(rules)):
            print("%s: %s names layer %s, which cmake/layers.cmake does not have"
                  % (doc_path.name, where, layer))
            bad += 1
    layers_text = (root / "cmake/layers.cmake").read_text()
    for line in check_holds(doc_path.name, doc, root, path_rules(layers_text), rules):
        print(line)
        bad += 1
    for line in check_backend_names(root):
        print(line)
        bad += 1
    print("architecture: %d layers, picture and table checked against cmake/layers.cmake and "
          "the headers, backend names checked, %d disagreements" % (len(rules), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
