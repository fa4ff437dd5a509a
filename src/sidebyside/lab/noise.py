"""The noise floor of a machine kind: how far apart two identical functions time.

Racing a function against itself (A/A) through the one measuring path
(:func:`sidebyside.lab.timing.compare`: the same processes, interleaving and
statistics as every verdict) gives time ratios that differ from 1 by noise
alone. The floor of a machine kind is a stated upper quantile of those
differences over the races of :func:`measure`: the 95th percentile
(:data:`sidebyside.lab.stats.FLOOR_QUANTILE`) of ``|ln r|``, written as the
fraction ``exp(q) - 1`` (:func:`sidebyside.lab.stats.noise_floor`), not the
largest, which one race sets. It is measured at one process count and applies
only to verdicts pooled over that many processes (:func:`sidebyside.lab.floors.floor`). A verdict
whose whole interval holds 1 and lies inside it is "practically tied"; one
whose ratio lies inside it but whose interval excludes 1 is a small, real
difference (:mod:`sidebyside.lab.verdict`).

``python -m sidebyside.lab.noise --save`` measures this machine kind's and
writes it beside the quiet baselines; the committed floors, and how every
timing reads them, are :mod:`sidebyside.lab.floors`.

Inputs: the machine kind. Outputs: a floor record (:func:`measure`).
"""

from __future__ import annotations

import datetime
import functools
import json
import math
import sys
from typing import Any

from sidebyside.lab import conditions, floors, pool, quiet, stats, timing
from sidebyside.run import provenance

__all__ = ["measure", "aa_functions"]


def aa_functions(size: int = 128) -> dict[str, Any]:
    """The functions :func:`measure` races against themselves: a PyTorch matmul, a jitted JAX
    matmul and a jitted JAX elementwise chain, each a builder of a two-name race."""
    return {name: functools.partial(_race, name, size) for name in ("torch matmul", "jax matmul", "jax elementwise")}


def _race(name: str, size: int) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch

    x = np.random.default_rng(0).standard_normal((size, size)).astype(np.float32)
    if name == "torch matmul":
        t = torch.from_numpy(x)
        fn = functools.partial(torch.matmul, t, t)
    elif name == "jax matmul":
        j = jnp.asarray(x)
        fn = functools.partial(jax.jit(jnp.matmul), j, j)
    else:
        j = jnp.asarray(x)
        fn = functools.partial(jax.jit(lambda v: jnp.tanh(v) * 2 + jnp.sin(v)), j)
    return {"A": fn, "B": fn}


def measure(trials: int = 8, *, processes: int | None = None, repeats: int = 15) -> dict[str, Any]:
    """Race each of :func:`aa_functions` against itself ``trials`` times through
    :func:`sidebyside.lab.timing.compare`, each race over ``processes`` processes, and return the
    floor record (see the module): ``floor``, ``quantile``, ``trials`` (the count of races),
    ``processes``, ``largest`` (the ratio furthest from 1), ``ratios``, ``measured_at`` and
    ``method``."""
    ratios = []
    for _ in range(trials):
        for builder in aa_functions().values():
            t = timing.compare(builder, repeats=repeats, processes=processes)
            ratios.append(stats.ratio_interval(t["A"].processes_s, t["B"].processes_s)["ratio"])
    largest = max(ratios, key=lambda r: abs(math.log(r)))
    return {**floors.floor_of(ratios), "trials": len(ratios), "largest": largest, "ratios": ratios,
            "processes": pool.processes(processes),
            "measured_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def main(argv: list[str] | None = None) -> int:
    """``python -m sidebyside.lab.noise``: measure this machine's floor (:func:`measure`), print it,
    and with ``--save`` commit it under this machine's kind (:func:`sidebyside.lab.quiet.machine_kind`:
    its fingerprint in words, not its thread count), with the fingerprint it was measured on."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m sidebyside.lab.noise",
                                     description="Measure this machine kind's noise floor by A/A races.")
    parser.add_argument("--trials", type=int, default=8, help="races of each function against itself (default 8)")
    parser.add_argument("--processes", type=int, default=5, help="processes per race (default 5, the cpu profile's)")
    parser.add_argument("--save", action="store_true", help=f"write it into {floors.floors_file()}")
    args = parser.parse_args(argv)
    conditions.same_conditions()
    found = measure(args.trials, processes=args.processes)
    kind = quiet.machine_kind()  # this machine's fingerprint in words: the same at every thread count
    found["fingerprint"] = provenance.cpu_fingerprint()
    print(json.dumps({"kind": kind, **{k: v for k, v in found.items() if k != "ratios"}}, indent=2))
    if args.save:
        floors.save(kind, found)
        print(f"saved as the noise floor of {kind} in {floors.floors_file()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
