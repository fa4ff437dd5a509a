"""How numbers and frameworks read in every sentence the site prints.

:data:`FRAMEWORKS` names the frameworks as prose does; :func:`fmt_number`,
:func:`fmt_signed`, :func:`fmt_ratio`, :func:`fmt_seconds` and :func:`plural`
format figures once, for every post (:mod:`sidebyside.lab.verdict` re-exports
them). Inputs: numbers; outputs: strings.
"""

from __future__ import annotations

import math

__all__ = ["FRAMEWORKS", "name", "fmt_number", "fmt_signed", "fmt_ratio", "fmt_seconds", "plural", "from_cpu_run"]

#: Framework keys as they appear in ladder names, and how prose names them.
FRAMEWORKS = {"torch": "PyTorch", "jax": "JAX"}


def name(framework: str) -> str:
    """How prose names ``framework`` (a :data:`FRAMEWORKS` key, or itself)."""
    return FRAMEWORKS.get(framework, framework)



def fmt_number(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant figures; integers stay integers;
    never "-0"."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if abs(value) >= 10 ** (digits - 1):  # a large figure reads best whole: 45,803, not 4.58e+04
        return f"{int(round(value)):,}"
    text = f"{value:#.{digits}g}"
    if "e" not in text:
        text = text.rstrip("0").rstrip(".") if "." in text else text
    if text.lstrip("-") in {"0", "0.0"} or float(text) == 0:
        return "0"
    return text


def fmt_signed(value: float, digits: int = 3) -> str:
    """``value`` with its sign always shown (``+1.6``, ``-0.05``); zero as
    "0", never "+0" or "-0.0"."""
    text = fmt_number(value, digits)
    return text if text.startswith("-") or text == "0" else "+" + text


def fmt_ratio(ratio: float) -> str:
    """A ratio as a speed factor: ``3.21×``, ``1.05×``, ``12.3×``."""
    return f"{fmt_number(ratio, 3)}×"


def fmt_seconds(seconds: float) -> str:
    """Seconds in the unit that reads best: ``412 µs``, ``3.27 ms``, ``1.5 s``."""
    if seconds is None or math.isnan(seconds):
        return "n/a"
    a = abs(seconds)
    if a >= 1:
        return f"{fmt_number(seconds)} s"
    if a >= 1e-3:
        return f"{fmt_number(seconds * 1e3)} ms"
    if a >= 1e-6:
        return f"{fmt_number(seconds * 1e6)} µs"
    return f"{fmt_number(seconds * 1e9)} ns"


def plural(n: int, word: str, plural_word: str | None = None) -> str:
    """``plural(1, "seed")`` -> "1 seed"; ``plural(5, "seed")`` -> "5 seeds"."""
    return f"{n} {word if n == 1 else (plural_word or word + 's')}"


def from_cpu_run(what: str, why: str = "does not depend on the hardware") -> str:
    """The one line a notebook shows under the gpu profile (``hardware_only``) where it leaves a section to
    the post's cpu run: a GPU run measures only what needs the GPU (speed, float32 parity of the timed
    models, compile time, memory); ``what`` (e.g. "Accuracy over seeds") ``why`` (needs no GPU)."""
    return f"{what} {why}: this GPU run leaves it to the post's cpu run, whose figures the post shows."
