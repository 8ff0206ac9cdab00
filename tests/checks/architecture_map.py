"""architecture_map.py ROOT [DOC]: docs/architecture.md agrees with cmake/layers.cmake.

Two places in the document name, for each layer, the project layers it may use:
  * the picture: the "uses (besides base)" column ("every layer" for app), base implied;
  * the table of "The layers": the "may include (project)" column ("-" for none).
Both must list exactly what the layer's GCULAUNCH_LAYER_ALLOW_<layer> row of
cmake/layers.cmake allows, and both must name every layer of that file.  Prints one line per
disagreement and exits 1 when there is one.
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
        m = re.match(r"  (\w+)\s{2,}", line)
        if m and m.group(1) in layers:
            current = m.group(1)
            uses[current] = set()
        elif not line.startswith("  ") or current is None:
            continue
        for word in re.findall(r"[a-z]+", line[column:]):
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
        if len(cells) < 7 or not re.fullmatch(r"[a-z]+", cells[1]) or cells[1] == "layer":
            continue
        names = set(re.findall(r"[a-z]+", cells[5]))
        result[cells[1]] = names
    return result


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
    print("architecture: %d layers, picture and table checked against cmake/layers.cmake, "
          "%d disagreements" % (len(rules), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
