#!/usr/bin/python3
"""torchrun of Debian's torch 1.13 (python3-torch in bookworm), made to work on
the Python 3.11 it ships with.  The benchmarks compare gculaunch with it.

    /usr/bin/python3 bench/torchrun113.py [torchrun arguments...]
    e.g. /usr/bin/python3 bench/torchrun113.py --standalone --nproc_per_node 2 \
             -r 3 -t 3 --log_dir /tmp/logs examples/allreduce.py

Debian's /usr/bin/torchrun fails before it starts a rank: torchrun turns the
values of --redirects/-r and --tee/-t (default "0") into members of the IntFlag
`Std` (NONE 0, OUT 1, ERR 2, ALL 3) by iterating over the class and comparing.
Since Python 3.11, iterating over a Flag yields only its single-bit members, so
0 and 3 find nothing, the value becomes None, and the agent crashes when it
uses it.  This wrapper replaces that conversion with a direct Std(int(value)),
keeps torch's own check of the syntax, and then runs torch.distributed.run
unchanged.  On a Python where the original works, nothing is replaced.
"""
import re
import sys

try:
    from torch.distributed.elastic.multiprocessing import api
    from torch.distributed import run
except ImportError as e:
    sys.exit("torchrun113.py: error: %s: run it with Debian's /usr/bin/python3 "
             "(package python3-torch)" % e)


def std_from_str(cls, text):
    """'0'..'3' -> a Std; 'RANK:V,RANK:V,...' -> {rank: Std}; else ValueError."""
    if re.match(api._VALUE_REGEX, text):
        return cls(int(text))
    if re.match(api._MAPPING_REGEX, text):
        mapping = {}
        for item in text.split(","):
            rank, value = item.split(":")
            mapping[int(rank)] = cls(int(value))
        return mapping
    raise ValueError("%s is neither one of 0..3 nor RANK:VALUE,... with values 0..3" % text)


def broken():
    return any(api.Std.from_str(str(v)) != api.Std(v) for v in range(4))


if __name__ == "__main__":
    if broken():
        api.Std.from_str = classmethod(std_from_str)
    sys.exit(run.main())
