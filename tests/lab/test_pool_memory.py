"""A timing worker gives back the memory a job built (sidebyside.lab.pool): the cpu profile keeps four
workers for a whole run, one after another on the cores, so what an idle worker keeps adds up (real-models'
full-size ladders overran a 24 GB machine before)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from sidebyside.lab import pool, timing

# Defined in __main__'s name so that cloudpickle sends it by value (as it sends a notebook's builder).
BUILDERS = textwrap.dedent("""
    def small():
        import numpy as np
        return {"a": lambda: np.zeros(1)}


    def fragmented():
        # Once a freed block of 4 MiB has raised glibc's mmap threshold, 1 MiB blocks come from the heap. One
        # small block stays alive after the job, above them, so the heap's top cannot shrink: without a trim
        # the worker keeps the pages of every block the job freed, as a worker kept a full-size model's.
        import sys
        import numpy as np
        first = [np.ones(1 << 19) for _ in range(4)]
        del first
        blocks = [np.ones(1 << 17) for _ in range(MIB)]
        sys.modules["builtins"].kept_by_the_test = np.ones(1 << 15)
        return {"a": lambda: blocks[0][0]}
""")


def _rss_mib(pid: int) -> float:
    line = next(row for row in Path(f"/proc/{pid}/status").read_text().splitlines() if row.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def test_a_worker_gives_back_what_a_job_built():
    mib = 600
    namespace = {"__name__": "__main__", "MIB": mib}
    exec(compile(BUILDERS, "<builders>", "exec"), namespace)
    options = {"repeats": 1, "warmup": 0, "number": 1}
    try:
        pool.measure_elsewhere(pool.pack(namespace["small"]), 1, timing.measure_here, **options)  # its imports
        pid = pool._WORKERS[1].process.pid
        before = _rss_mib(pid)
        timings, errors = pool.measure_elsewhere(pool.pack(namespace["fragmented"]), 1, timing.measure_here, **options)
        assert not errors and set(timings) == {"a"}
        kept = _rss_mib(pid) - before
        assert kept < mib / 4, f"the worker kept {kept:.0f} MiB of the {mib} MiB its job built and freed"
    finally:
        pool.close()
