"""The timed parts of xla-and-scipy, each returning a value that a run in parts saves as JSON and
reads back unchanged.

The notebook wraps each call below in its :class:`sidebyside.run.checkpoints.Checkpoints`
(``parts(name, fn, ...)``), one part per case, device, optimiser, strategy or approach:

- :func:`ladder_entries`: one case of the linear-algebra ladder (its entries);
- :func:`precision_rows`: the float32 matmul under each library's settings on one device, timed
  together, with each result's error against float64;
- :func:`fit`: one optimiser's calibration fit, timed, with its result's quality;
- :func:`first_calls`: one retracing strategy at every data length, with its traces counted;
- :func:`two_passes`: one way of passing a configuration to a jitted loss, a pass timed twice.

Every value is made of dicts, lists, strings, numbers, booleans and None, so no part needs a
``decode``. A part that draws its data from the notebook's generator goes through
:meth:`sidebyside.run.checkpoints.Checkpoints.drawn`,
which saves the generator's state with it and puts it back on reading, so that a run in parts draws
what an uninterrupted run draws. :func:`slug` turns a label into a part name's word. This module
imports neither PyTorch nor JAX.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from sidebyside.lab import timing

__all__ = ["slug", "as_numpy", "ladder_entries", "precision_rows", "fit",
           "first_calls", "two_passes"]


def slug(label: str) -> str:
    """A label as one word of a part's name: lower case, each run of other characters than letters
    and digits one "-" (``"padding, length static"`` -> ``"padding-length-static"``)."""
    word = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")
    if not word:
        raise ValueError(f"{label!r} has no letter or digit to name a part by")
    return word


def as_numpy(value: Any) -> np.ndarray:
    """A PyTorch tensor (on any device) or a JAX or NumPy array, as a NumPy array."""
    return value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)


def ladder_entries(candidates: Mapping[str, Any], *, repeats: int, min_repeat_s: float,
                   processes: int | None = None) -> dict[str, dict[str, Any]]:
    """The entries of :func:`sidebyside.lab.timing.ladder` over ``candidates`` (one per rung, in
    order: timed, failed or not applicable)."""
    entries, _ = timing.ladder(candidates, repeats=repeats, min_repeat_s=min_repeat_s,
                               processes=processes)
    return entries


def precision_rows(variants: Mapping[tuple[str, str], Callable[[], Any]], reference: np.ndarray, *,
                   device: str, repeats: int, min_repeat_s: float,
                   processes: int | None = None) -> list[dict[str, Any]]:
    """``variants`` (``(framework, setting)`` -> a product's call) timed together
    (:func:`sidebyside.lab.timing.compare`), then each result's error relative to ``reference``
    (Frobenius norms). One row per variant, in order: ``device``, ``framework``, ``setting``,
    ``relative error``, ``median (ms)`` and ``IQR (ms)``."""
    times = timing.compare({f"{k[0]} {k[1]}": v for k, v in variants.items()}, repeats=repeats,
                           min_repeat_s=min_repeat_s, processes=processes)
    rows = []
    for (framework, setting), fn in variants.items():
        result = as_numpy(fn())
        t = times[f"{framework} {setting}"]
        error = np.linalg.norm(result - reference) / np.linalg.norm(reference)
        rows.append({"device": device, "framework": framework, "setting": setting,
                     "relative error": float(error), "median (ms)": t.median_s * 1e3,
                     "IQR (ms)": t.iqr_s * 1e3})
    return rows


def fit(run: Callable[[], tuple], *, name: str, loss: Callable[[np.ndarray], float],
        gradient: Callable[[np.ndarray], Any], truth: np.ndarray, optimum: np.ndarray, repeats: int,
        min_repeat_s: float) -> dict[str, Any]:
    """One optimiser, ``run()`` returning ``(params, nit, nfev, success, status)``: timed as written
    (:func:`sidebyside.lab.timing.time_fn`), then run once more for its result, scored by ``loss``
    and by ``gradient``'s largest absolute component at it, and by its distances to ``truth`` and to
    the exact ``optimum``. Returns the results record's entry: ``seconds`` (median), ``iqr_s``,
    ``first_call_s``, ``nit``, ``nfev``, ``params`` (a list), ``error``, ``error_vs_optimum``,
    ``rmse``, ``grad_inf_norm``, ``success`` and ``status`` (None where the method reports
    neither)."""
    t = timing.time_fn(run, name=name, repeats=repeats, min_repeat_s=min_repeat_s)
    params, nit, nfev, success, status = run()
    params = as_numpy(params)
    return {"seconds": t.median_s, "iqr_s": t.iqr_s, "first_call_s": t.first_s, "nit": int(nit),
            "nfev": int(nfev), "params": params.tolist(),
            "error": float(np.linalg.norm(params - truth)),
            "error_vs_optimum": float(np.linalg.norm(params - optimum)),
            "rmse": float(loss(params)),
            "grad_inf_norm": float(np.max(np.abs(np.asarray(gradient(params))))),
            "success": success, "status": status}


def first_calls(loss_at: Callable[[int], Any], lengths: list[int], *, strategy: str,
                expected: Callable[[int], float], traces: Mapping[str, int], min_repeat_s: float,
                check: Callable[[int, float], None] | None = None) -> dict[str, Any]:
    """One retracing strategy: ``loss_at(n)`` (the loss on the first n measurements) timed at each
    length in ``lengths``, its first call apart (a trace and a compilation where the strategy needs
    one), 3 repeats of at least ``min_repeat_s / 4``; each value must equal ``expected(n)`` to 1e-12
    (and pass ``check(n, expected(n))`` where given). Returns ``rows`` (``strategy``, ``length``,
    ``first call (ms)``, ``steady (ms)``) and ``traces``: ``traces[strategy]`` after the last
    length, the strategy's count of traces (the notebook's counter)."""
    rows = []
    for n in lengths:
        t = timing.time_fn(functools.partial(loss_at, n), repeats=3, min_repeat_s=min_repeat_s / 4)
        want = expected(n)
        np.testing.assert_allclose(float(loss_at(n)), want, rtol=1e-12)
        if check is not None:
            check(n, want)
        rows.append({"strategy": strategy, "length": n, "first call (ms)": t.first_s * 1e3,
                     "steady (ms)": t.median_s * 1e3})
    return {"rows": rows, "traces": int(traces.get(strategy, 0))}


def two_passes(one_pass: Callable[[], Any], *, approach: str, calls: int,
               traces: Mapping[str, int]) -> dict[str, Any]:
    """``one_pass()`` (``calls`` calls of a jitted loss) run twice, each pass timed once: the first
    pass alone, then one timed repeat. Returns the table's row: ``approach``, ``calls per pass``,
    ``traces in both passes`` (``traces[approach]`` afterwards), ``first pass (ms)`` and
    ``second pass (ms)``."""
    t = timing.time_fn(one_pass, repeats=1, warmup=0, number=1)
    return {"approach": approach, "calls per pass": calls,
            "traces in both passes": int(traces.get(approach, 0)),
            "first pass (ms)": t.first_s * 1e3, "second pass (ms)": t.median_s * 1e3}
