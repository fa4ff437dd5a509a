"""The control race of jit-and-autograd-timing: f with its sin and cos replaced by polynomials.

The post's f is ``0.2 x + sin(x) + cos(2x)``; its control ``g`` is the same line with ``sin`` and
``cos`` replaced by their Taylor polynomials (:data:`SIN_TAYLOR`, :data:`COS_TAYLOR`, written by
Horner's rule with multiplies and adds only): the same shape (one float32 read and one written per
element, fused into one loop by either compiler) without a transcendental function. Raced on the
same ladders at the headline's size, it separates what the compilers do for any element-wise loop
from what they do for sin and cos.

- :func:`exact` and :func:`exact_grad`: ``g`` and ``g'`` in float64, for checking the rungs' values.
- :func:`primitives` and :func:`transcendentals`: the primitives of a function's jaxpr, sub-jaxprs
  included, and those among them that are transcendental (``sin``, ``cos``, ``exp`` ...).
- :func:`bind`: a ladder's rungs (``"<framework>/<tool>"`` -> function of one vector) bound to one
  input, each framework's own copy; the ladder builder of the headline's races and the control's.
- :func:`flag_trials`: a jitted function timed in child processes, one per set of ``XLA_FLAGS``,
  to see whether an XLA option changes its code (a finding, one process each, not a verdict);
  :func:`cpu_options`: the ``xla_cpu_`` option names in the installed jaxlib, and those about math;
  :func:`flags_sentence`: what the options tried did, for the post's conclusion.

Imports neither PyTorch nor JAX until a function needs one.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

import numpy as np

from sidebyside.lab import words

__all__ = [
    "SIN_TAYLOR",
    "COS_TAYLOR",
    "TRANSCENDENTAL",
    "exact",
    "exact_grad",
    "primitives",
    "transcendentals",
    "bind",
    "flag_trials",
    "cpu_options",
]

#: sin x to degree 7 (coefficients of x**0 ... x**7): x - x³/6 + x⁵/120 - x⁷/5040.
SIN_TAYLOR = (0.0, 1.0, 0.0, -1 / 6, 0.0, 1 / 120, 0.0, -1 / 5040)
#: cos y to degree 6 (coefficients of y**0 ... y**6): 1 - y²/2 + y⁴/24 - y⁶/720.
COS_TAYLOR = (1.0, 0.0, -1 / 2, 0.0, 1 / 24, 0.0, -1 / 720)

#: jaxpr primitives that compute a transcendental function (a library call or a long polynomial).
TRANSCENDENTAL = frozenset(
    {
        "sin",
        "cos",
        "tan",
        "asin",
        "acos",
        "atan",
        "atan2",
        "sinh",
        "cosh",
        "asinh",
        "acosh",
        "atanh",
        "exp",
        "exp2",
        "expm1",
        "log",
        "log1p",
        "tanh",
        "logistic",
        "pow",
        "erf",
        "erfc",
        "erf_inv",
        "lgamma",
        "digamma",
    }
)


def exact(x: Any) -> np.ndarray:
    """The control ``g(x) = 0.2 x + S(x) + C(2x)`` in float64 (S, C: :data:`SIN_TAYLOR`,
    :data:`COS_TAYLOR`)."""
    x = np.asarray(x, dtype=np.float64)
    sin_p, cos_p = np.polynomial.Polynomial(SIN_TAYLOR), np.polynomial.Polynomial(COS_TAYLOR)
    return 0.2 * x + sin_p(x) + cos_p(2 * x)


def exact_grad(x: Any) -> np.ndarray:
    """``g'(x) = 0.2 + S'(x) + 2 C'(2x)`` in float64: the exact gradient of :func:`exact`."""
    x = np.asarray(x, dtype=np.float64)
    sin_p, cos_p = np.polynomial.Polynomial(SIN_TAYLOR), np.polynomial.Polynomial(COS_TAYLOR)
    return 0.2 + sin_p.deriv()(x) + 2 * cos_p.deriv()(2 * x)


def _walk(jaxpr: Any) -> Iterable[str]:
    from jax.extend import core

    for eqn in jaxpr.eqns:
        yield eqn.primitive.name
        for param in eqn.params.values():
            for sub in param if isinstance(param, (tuple, list)) else (param,):
                if isinstance(sub, core.ClosedJaxpr):
                    yield from _walk(sub.jaxpr)
                elif isinstance(sub, core.Jaxpr):
                    yield from _walk(sub)


def primitives(fn: Callable[..., Any], *args: Any) -> set[str]:
    """The names of the primitives in ``jax.make_jaxpr(fn)(*args)``, sub-jaxprs (``jit``,
    ``custom_jvp_call``, ...) included."""
    import jax

    return set(_walk(jax.make_jaxpr(fn)(*args).jaxpr))


def transcendentals(fn: Callable[..., Any], *args: Any) -> set[str]:
    """The primitives of ``fn``'s jaxpr that are transcendental (:data:`TRANSCENDENTAL`)."""
    return primitives(fn, *args) & TRANSCENDENTAL


def bind(
    rungs: Mapping[str, Any],
    x: np.ndarray,
    *,
    jax_device: Any = None,
    torch_device: Any = None,
    static: Iterable[str] = (),
) -> dict[str, Any]:
    """Each rung (``"<framework>/<tool>"`` -> a function of one vector) bound to ``x`` by
    ``functools.partial``: a JAX rung to ``x`` put on ``jax_device``, a PyTorch rung to a tensor on
    ``torch_device``, a NumPy rung to ``x`` itself. A rung named in ``static`` gets its own clone,
    marked as a static address (``torch._dynamo.mark_static_address``: a CUDA graph reads it in
    place). A rung that is not a callable (a :class:`sidebyside.lab.timing.NotApplicable`) is
    kept."""
    inputs: dict[str, Any] = {"numpy": x}
    frameworks = {name.split("/", 1)[0] for name, fn in rungs.items() if callable(fn)}
    if "jax" in frameworks:
        import jax

        inputs["jax"] = jax.device_put(x, jax_device)
    if "torch" in frameworks:
        import torch

        inputs["torch"] = torch.from_numpy(x).to(torch_device)
    out = {}
    for name, fn in rungs.items():
        framework = name.split("/", 1)[0]
        if not callable(fn):
            out[name] = fn
            continue
        given = inputs[framework]
        if name in static:
            import torch._dynamo

            given = given.clone()
            torch._dynamo.mark_static_address(given)
        out[name] = partial(fn, given)
    return out


_TRIAL = """
import pickle, sys
import numpy as np
import jax
from sidebyside.lab import timing
fn, x, repeats, min_repeat_s = pickle.loads(sys.stdin.buffer.read())
f, x = jax.jit(fn), jax.device_put(x)
y = np.asarray(f(x))
t = timing.time_fn(lambda: f(x), name="jax/jit", repeats=repeats, min_repeat_s=min_repeat_s)
sys.stdout.buffer.write(pickle.dumps((t.median_s, y)))
"""


def flag_trials(
    fn: Callable[[Any], Any],
    x: np.ndarray,
    flags: Iterable[str],
    *,
    repeats: int = 7,
    min_repeat_s: float = 0.05,
    timeout_s: float = 600,
) -> list[dict[str, Any]]:
    """``jax.jit(fn)(x)`` on the CPU, timed (:func:`sidebyside.lab.timing.time_fn`: ``repeats``
    repeats of at least ``min_repeat_s``) in a fresh child process per entry of ``flags`` (options
    added to this process's ``XLA_FLAGS``; "" for none added), the child sharing this process's CPU
    affinity and environment (``JAX_PLATFORMS=cpu`` apart). ``fn`` travels by value
    (cloudpickle). One row per entry: ``flags``, ``median_s`` (per call), ``per_element_s`` and
    ``max_abs_diff`` (the largest difference of its result from the first entry's: 0 when the
    option left the code's arithmetic as it was), or ``error`` (one line) where the child failed."""
    import pickle

    import cloudpickle

    payload = cloudpickle.dumps((fn, np.asarray(x), repeats, min_repeat_s))
    base, rows, first = os.environ.get("XLA_FLAGS", ""), [], None
    for extra in flags:
        env = {**os.environ, "XLA_FLAGS": f"{base} {extra}".strip(), "JAX_PLATFORMS": "cpu"}
        done = subprocess.run(
            [sys.executable, "-c", _TRIAL],
            input=payload,
            capture_output=True,
            env=env,
            timeout=timeout_s,
        )
        if done.returncode != 0:
            tail = done.stderr.decode(errors="replace").strip().splitlines()
            rows.append(
                {"flags": extra, "error": tail[-1] if tail else f"exit status {done.returncode}"}
            )
            continue
        median_s, y = pickle.loads(done.stdout)
        first = y if first is None else first
        rows.append(
            {
                "flags": extra,
                "median_s": median_s,
                "per_element_s": median_s / np.size(x),
                "max_abs_diff": float(np.max(np.abs(y.astype(np.float64) - first))),
                "error": None,
            }
        )
    return rows


#: An option name about vectorised or transcendental math.
_MATH_OPTION = re.compile(
    r"sin|cos|trig|transcend|sleef|svml|veclib|libmvec|vector_math|polynomial_approx"
)


def cpu_options() -> dict[str, Any]:
    """The ``xla_cpu_...`` option names in the installed jaxlib's shared libraries (read from their
    bytes: XLA has no call that lists its options), ``{"jaxlib": version, "all": sorted names,
    "vector_math": the names about sin, cos, transcendental functions or a vector math
    library}``."""
    from pathlib import Path

    import jaxlib

    names: set[str] = set()
    for library in Path(jaxlib.__file__).parent.glob("*.so"):
        names.update(
            m.decode()
            for m in re.findall(
                rb"(?<![A-Za-z0-9_])xla_cpu_[a-z0-9_]{1,56}(?![A-Za-z0-9_])", library.read_bytes()
            )
        )
    found = sorted(n.rstrip("_") for n in names)
    return {
        "jaxlib": jaxlib.__version__,
        "all": sorted(set(found)),
        "vector_math": [n for n in sorted(set(found)) if _MATH_OPTION.search(n)],
    }


def flags_sentence(
    rows: list[Mapping[str, Any]], jaxlib: str = "", options: Mapping[str, Any] | None = None
) -> str:
    """What each XLA option tried did to ``jax.jit``'s f (rows of
    :func:`flag_trials`, the first without options): its time
    per element against the defaults', and whether its values changed; then, from ``options``
    (:func:`cpu_options`), which of jaxlib's CPU options name
    vectorised math. "" without rows."""
    if not rows or rows[0].get("error"):
        return ""
    base = rows[0]
    tried = []
    for row in rows[1:]:
        if row.get("error"):
            tried.append(f"`{row['flags']}` was refused ({row['error']})")
            continue
        same = (
            "the same values bit for bit"
            if row["max_abs_diff"] == 0
            else f"values that differ by up to {words.fmt_number(row['max_abs_diff'])}"
        )
        tried.append(
            f"with `{row['flags']}` it takes {words.fmt_seconds(row['per_element_s'])} an element, "
            f"{same}"
        )
    version = f" {jaxlib}" if jaxlib else ""
    return (
        f"**XLA's CPU options** (jaxlib{version}; each in a child process of its own, one "
        "observation, not a verdict): with its defaults `jax.jit`'s f takes "
        f"{words.fmt_seconds(base['per_element_s'])} "
        "an element; " + "; ".join(tried) + "." + _options_text(options)
    )


def _options_text(options: Mapping[str, Any] | None) -> str:
    if not options:
        return ""
    named = options["vector_math"]
    return (
        f" Of the {len(options['all'])} names that begin `xla_cpu_` in jaxlib's libraries (its "
        "CPU options "
        "among them), "
        + (
            f"these name vectorised or transcendental math: {', '.join(f'`{n}`' for n in named)}."
            if named
            else "none names sin, cos, transcendental functions or a vector math library (SVML, "
            "SLEEF, libmvec)."
        )
    )
