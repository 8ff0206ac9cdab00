"""--metrics-port (issue 15): /metrics scraped before and after a rank failure with a restart.
The restart counter and the exit-code series move as they should, the store's connections and
operations are counted, and every scrape parses with the strict Prometheus text-format parser
below (written here, from the exposition format's rules, not taken from a library)."""
import math
import os
import re
import socket
import time
import unittest
import urllib.error
import urllib.request

import gltest

# Each rank connects to gculaunch's store (a real torch client), says it is ready, and waits
# for a file from the test: in attempt 0, rank 1 then fails with exit code 7 (rank 0 waits on,
# and is stopped with SIGTERM); in attempt 1 every rank exits 0.
RANK = r"""
import os, sys, time
from datetime import timedelta
import torch.distributed as dist
rank, count = int(os.environ["RANK"]), os.environ["TORCHELASTIC_RESTART_COUNT"]
store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                      int(os.environ["WORLD_SIZE"]), False, timedelta(seconds=60))
store.set("ready/%s/%d" % (count, rank), "1")
store.wait(["ready/%s/0" % count, "ready/%s/1" % count])
print("ready %s %d" % (count, rank), flush=True)
go = os.path.join(sys.argv[1], "never" if (count, rank) == ("0", 0) else "go%s" % count)
for _ in range(1200):
    if os.path.exists(go):
        break
    time.sleep(0.05)
sys.exit(7 if count == "0" and rank == 1 else 0)
"""

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TYPES = ("counter", "gauge", "summary", "histogram", "untyped")


class ParseError(AssertionError):
    pass


def parse_value(text, where):
    if text in ("NaN", "+Inf", "-Inf"):
        return float(text.replace("Inf", "inf").replace("NaN", "nan"))
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text):
        raise ParseError("%s: value %r is not a float" % (where, text))
    return float(text)


def parse_labels(text, pos, where):
    """Parses `{name="value",...}` from text[pos] == '{'; returns (labels, next position)."""
    labels = {}
    pos += 1
    while True:
        if text[pos:pos + 1] == "}":
            return labels, pos + 1
        m = LABEL.match(text, pos)
        if not m:
            raise ParseError("%s: bad label name at %r" % (where, text[pos:]))
        name = m.group(0)
        if name.startswith("__"):
            raise ParseError("%s: reserved label name %s" % (where, name))
        if name in labels:
            raise ParseError("%s: label %s twice" % (where, name))
        pos = m.end()
        if text[pos:pos + 2] != '="':
            raise ParseError("%s: expected =\" after %s" % (where, name))
        pos += 2
        value = ""
        while True:
            if pos >= len(text):
                raise ParseError("%s: unterminated label value" % where)
            c = text[pos]
            if c == "\\":
                esc = text[pos + 1:pos + 2]
                if esc not in ("\\", '"', "n"):
                    raise ParseError("%s: bad escape \\%s" % (where, esc))
                value += "\n" if esc == "n" else esc
                pos += 2
            elif c == '"':
                pos += 1
                break
            elif c == "\n":
                raise ParseError("%s: newline in a label value" % where)
            else:
                value += c
                pos += 1
        labels[name] = value
        if text[pos:pos + 1] == ",":
            pos += 1
        elif text[pos:pos + 1] != "}":
            raise ParseError("%s: expected , or } at %r" % (where, text[pos:]))


def family_of(name, types):
    """The declared family a sample name belongs to, by the suffix rules of its type."""
    if name in types and types[name] in ("counter", "gauge", "untyped"):
        return name
    for suffix, kinds in (("_bucket", ("histogram",)), ("_sum", ("summary", "histogram")),
                          ("_count", ("summary", "histogram"))):
        base = name[:-len(suffix)]
        if name.endswith(suffix) and types.get(base) in kinds:
            return base
    if name in types:  # a summary or histogram sample without its suffix
        return name
    return None


def parse_exposition(text):
    """Strictly parses Prometheus text format 0.0.4.  Returns {family: {"type", "help",
    "samples": [(name, labels, value)]}}; raises ParseError on anything not allowed."""
    if not text.endswith("\n"):
        raise ParseError("the text does not end with a newline")
    families, types, order = {}, {}, []
    closed = set()  # families whose samples ended (a family's samples must be contiguous)
    current = None
    seen = set()
    for n, line in enumerate(text[:-1].split("\n"), 1):
        where = "line %d" % n
        if line == "":
            raise ParseError("%s: empty line" % where)
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                if not NAME.fullmatch(name):
                    raise ParseError("%s: bad metric name %r" % (where, name))
                fam = families.setdefault(name, {"type": None, "help": None, "samples": []})
                if fam["samples"] or name in closed:
                    raise ParseError("%s: %s after samples of %s" % (where, parts[1], name))
                if parts[1] == "TYPE":
                    if fam["type"] is not None:
                        raise ParseError("%s: a second TYPE for %s" % (where, name))
                    if len(parts) != 4 or parts[3] not in TYPES:
                        raise ParseError("%s: bad type in %r" % (where, line))
                    fam["type"] = types[name] = parts[3]
                else:
                    if fam["help"] is not None:
                        raise ParseError("%s: a second HELP for %s" % (where, name))
                    if len(parts) != 4 or not parts[3]:
                        raise ParseError("%s: empty HELP for %s" % (where, name))
                    fam["help"] = parts[3]
                if current is not None and current != name:
                    closed.add(current)
                current = name
                if name not in order:
                    order.append(name)
            continue  # another comment
        m = NAME.match(line)
        if not m:
            raise ParseError("%s: bad metric name in %r" % (where, line))
        name, pos = m.group(0), m.end()
        labels = {}
        if line[pos:pos + 1] == "{":
            labels, pos = parse_labels(line, pos, where)
        if line[pos:pos + 1] != " ":
            raise ParseError("%s: expected a space before the value in %r" % (where, line))
        fields = line[pos + 1:].split(" ")
        if len(fields) not in (1, 2) or (len(fields) == 2 and not re.fullmatch(r"-?\d+",
                                                                                fields[1])):
            raise ParseError("%s: bad value or timestamp in %r" % (where, line))
        value = parse_value(fields[0], where)
        fam_name = family_of(name, types)
        if fam_name is None:
            raise ParseError("%s: sample %s has no TYPE line before it" % (where, name))
        if fam_name in closed:
            raise ParseError("%s: samples of %s are not contiguous" % (where, fam_name))
        if current is not None and current != fam_name:
            closed.add(current)
        current = fam_name
        key = (name, tuple(sorted(labels.items())))
        if key in seen:
            raise ParseError("%s: duplicate sample %s%s" % (where, name, labels))
        seen.add(key)
        kind = types[fam_name]
        if kind == "counter" and (not name.endswith("_total") or value < 0):
            raise ParseError("%s: counter %s must end in _total and not be negative" % (where,
                                                                                     name))
        if name.endswith("_bucket") and "le" not in labels:
            raise ParseError("%s: bucket without le" % where)
        families[fam_name]["samples"].append((name, labels, value))
    for name, fam in families.items():
        if fam["type"] is None or fam["help"] is None:
            raise ParseError("family %s lacks its TYPE or HELP" % name)
        if fam["type"] == "histogram":
            check_histogram(name, fam["samples"])
    return families


def check_histogram(name, samples):
    series = {}
    for sample, labels, value in samples:
        rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        s = series.setdefault(rest, {"buckets": [], "count": None})
        if sample.endswith("_bucket"):
            s["buckets"].append((parse_value(labels["le"], name), value))
        elif sample.endswith("_count"):
            s["count"] = value
    for rest, s in series.items():
        bounds = [b for b, _ in s["buckets"]]
        counts = [c for _, c in s["buckets"]]
        if bounds != sorted(bounds) or not bounds or not math.isinf(bounds[-1]):
            raise ParseError("%s%s: buckets unsorted or without +Inf" % (name, rest))
        if counts != sorted(counts) or counts[-1] != s["count"]:
            raise ParseError("%s%s: buckets not cumulative or +Inf != _count" % (name, rest))


def value(families, family, sample=None, **labels):
    for name, l, v in families.get(family, {"samples": []})["samples"]:
        if name == (sample or family) and l == labels:
            return v
    return None


class StrictParser(unittest.TestCase):
    """The parser must be able to fail: each broken text is refused."""

    GOOD = ("# HELP gculaunch_x_total x\n# TYPE gculaunch_x_total counter\n"
            "gculaunch_x_total{a=\"q\\\"\\\\\\n\"} 1\n")

    def test_good_text_parses(self):
        fam = parse_exposition(self.GOOD)
        self.assertEqual(fam["gculaunch_x_total"]["samples"],
                         [("gculaunch_x_total", {"a": 'q"\\\n'}, 1.0)])

    def test_broken_texts_are_refused(self):
        bad = [
            self.GOOD[:-1],                                             # no final newline
            self.GOOD.replace("counter", "counterx"),                   # unknown type
            self.GOOD + "# TYPE gculaunch_x_total counter\n",           # TYPE twice / late
            self.GOOD.replace("x_total{", "x{").replace("x_total c", "x c")
                .replace("HELP gculaunch_x_total", "HELP gculaunch_x"),  # counter without _total
            self.GOOD.replace(" 1\n", " one\n"),                        # value not a float
            self.GOOD.replace("{a=", "{1a="),                           # bad label name
            self.GOOD.replace("\\\"", "\\t"),                           # bad escape
            "gculaunch_y 1\n",                                          # no TYPE
            self.GOOD + "\n",                                           # empty line
            self.GOOD.replace("gculaunch_x_total{", "9x{"),             # bad metric name
            self.GOOD + "gculaunch_x_total{a=\"q\\\"\\\\\\n\"} 2\n",    # duplicate sample
        ]
        for text in bad:
            with self.assertRaises(ParseError, msg=repr(text)):
                parse_exposition(text)


class Metrics(unittest.TestCase):
    def scrape(self, port):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
            self.assertEqual(r.status, 200)
            self.assertEqual(r.headers["Content-Type"], "text/plain; version=0.0.4; charset=utf-8")
            text = r.read().decode()
        families = parse_exposition(text)
        for name in families:
            self.assertTrue(name.startswith("gculaunch_"), name)
        return families

    def test_scrapes_before_and_after_a_failure_with_a_restart(self):
        port = gltest.free_port()
        with gltest.TempDir() as tmp:
            script = os.path.join(tmp, "rank.py")
            with open(script, "w") as f:
                f.write(RANK)
            args = ["--nproc-per-node", "2", "--device", "cpu", "--python", gltest.PYTHON,
                    "--max-restarts", "1", "--standalone", "--metrics-port", str(port),
                    "--grace-period", "10", script, tmp]
            with gltest.Job(args) as job:
                job.wait_for(lambda out, err: "ready 0 0" in out and "ready 0 1" in out,
                             timeout=120, what="attempt 0 to be ready")
                before = self.scrape(port)
                self.assertEqual(value(before, "gculaunch_restarts_total"), 0)
                self.assertEqual(value(before, "gculaunch_ranks_running"), 2)
                self.assertEqual(value(before, "gculaunch_epoch"), 0)
                self.assertEqual(before["gculaunch_rank_exits_total"]["samples"], [])
                self.assertGreaterEqual(value(before, "gculaunch_store_connections_total"), 2)
                self.assertGreaterEqual(value(before, "gculaunch_store_operations_total",
                                              op="SET"), 2)
                self.assertGreaterEqual(value(before, "gculaunch_store_operation_duration_seconds",
                                              "gculaunch_store_operation_duration_seconds_count",
                                              op="WAIT"), 2)
                self.assertGreater(value(before, "gculaunch_process_resident_memory_bytes"), 0)
                open(os.path.join(tmp, "go0"), "w").close()
                job.wait_for(lambda out, err: "ready 1 0" in out and "ready 1 1" in out,
                             timeout=120, what="attempt 1 to be ready")
                after = self.scrape(port)
                self.assertEqual(value(after, "gculaunch_restarts_total"), 1)
                self.assertEqual(value(after, "gculaunch_epoch"), 1)
                self.assertEqual(value(after, "gculaunch_ranks_running"), 2)
                self.assertEqual(value(after, "gculaunch_rank_exits_total", exit_code="7"), 1)
                self.assertEqual(value(after, "gculaunch_rank_exits_total", exit_code="143",
                                       signal="SIGTERM"), 1)
                self.assertEqual(len(after["gculaunch_rank_exits_total"]["samples"]), 2)
                self.assertEqual(value(after, "gculaunch_restart_duration_seconds",
                                       "gculaunch_restart_duration_seconds_count"), 1)
                self.assertGreater(value(after, "gculaunch_store_connections_total"),
                                   value(before, "gculaunch_store_connections_total"))
                uptimes = after["gculaunch_rank_uptime_seconds"]["samples"]
                self.assertEqual(sorted(l["rank"] for _, l, _ in uptimes), ["0", "1"])
                # other paths and methods
                with self.assertRaises(urllib.error.HTTPError) as e:
                    urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=10)
                self.assertEqual(e.exception.code, 404)
                open(os.path.join(tmp, "go1"), "w").close()
                self.assertEqual(job.wait(timeout=120), 0, job.stderr)
            self.assertIn("gculaunch: metrics: http://127.0.0.1:%d/metrics" % port, job.stderr)

    def test_port_in_use_is_one_line_and_exit_2(self):
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", 0))
            holder.listen(1)
            port = holder.getsockname()[1]
            with gltest.Job(["--nproc-per-node", "1", "--master-port", "0", "--metrics-port", str(port)]
                            + gltest.child_args("exit", "0")) as job:
                code = job.wait(timeout=60)
                self.assertEqual(code, 2, job.stderr)
                self.assertEqual(job.stderr, (
                    "gculaunch: --metrics-port %d: cannot listen on 127.0.0.1:%d: Address "
                    "already in use (fix: choose a free port with --metrics-port (or stop what "
                    "listens there), or another --metrics-addr)\n" % (port, port)))

    def test_metrics_addr_without_port_is_refused(self):
        with gltest.Job(["--nproc-per-node", "1", "--master-port", "0", "--metrics-addr", "0.0.0.0"]
                        + gltest.child_args("exit", "0")) as job:
            self.assertEqual(job.wait(timeout=60), 2)
            self.assertEqual(job.stderr, "gculaunch: --metrics-addr only applies with "
                             "--metrics-port (fix: add --metrics-port PORT, or drop "
                             "--metrics-addr)\n")

    def test_slow_clients_cannot_starve_a_scrape(self):
        port = gltest.free_port()
        with gltest.Job(["--nproc-per-node", "1", "--standalone", "--device", "cpu",
                         "--metrics-port", str(port)] + gltest.child_args("sleep", "60")) as job:
            job.wait_for(lambda out, err: "metrics: http://" in err, timeout=60,
                         what="the metrics endpoint")
            self.scrape(port)
            # 40 clients that open a request head and never finish it: more than the 32 slots.
            slow = []
            for _ in range(40):
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                slow.append(s)
            try:
                families = self.scrape(port)
                self.assertEqual(value(families, "gculaunch_ranks_running"), 1)
            finally:
                for s in slow:
                    s.close()


if __name__ == "__main__":
    unittest.main()
