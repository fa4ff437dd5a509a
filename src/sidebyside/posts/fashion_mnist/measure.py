"""The measured parts of fashion-mnist-pytorch-vs-flax: what a run in parts saves and reads back.

The notebook wraps each call below in its :class:`sidebyside.run.checkpoints.Checkpoints`
(``parts(name, fn, ...)``), one part per measurement, in the order it runs them:

- ``original/<variant>/<seed>``: one run of the original program (section 1), its test accuracy
  (a float, saved as it is);
- ``accuracy/<model>/<framework>/<seed>``: :func:`seed_run`, one seed's training and its per-class
  test accuracy (a :class:`SeedRun`);
- ``speed/<model>/<precision>``: :func:`ladder`, one model's ladder of tools in one precision,
  timed in every process of the run, as the ``metrics["speed"]`` workload it becomes.

Every value is JSON as the checkpoint file holds it, or a dataclass that :meth:`SeedRun.saved`
rebuilds, so that a part read back gives what measuring it gives. This module imports neither
PyTorch nor JAX.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from sidebyside.lab import timing
from sidebyside.lab.training import History
from sidebyside.posts.fashion_mnist import report

__all__ = ["COMPILED", "SeedRun", "seed_run", "per_class_accuracy", "ladder"]

#: The ``torch.compile`` rungs whose graph breaks are counted, by the compile mode each uses.
COMPILED = {"torch/compile": "default", "torch/compile+cuda-graphs": "reduce-overhead"}


@dataclasses.dataclass
class SeedRun:
    """One seed's training of one model in one framework: its ``history`` (per epoch) and its
    final model's test accuracy per class (``per_class``, fractions, class 0 first)."""

    history: History
    per_class: list[float]

    @classmethod
    def saved(cls, value: Mapping[str, Any]) -> SeedRun:
        """The run a part saved (its fields, as JSON): the ``decode`` of a part returning one."""
        return cls(History(**value["history"]), [float(v) for v in value["per_class"]])


def per_class_accuracy(predicted: Any, labels: Any, classes: int = 10) -> list[float]:
    """The fraction of each class's examples (``labels == c``) that ``predicted`` gets right, for
    ``c`` in ``range(classes)``."""
    predicted, labels = np.asarray(predicted), np.asarray(labels)
    if predicted.shape != labels.shape:
        raise ValueError(f"predicted {predicted.shape} and labels {labels.shape} must have one "
                         f"shape: one predicted class per test example")
    return [float(np.mean(predicted[labels == c] == c)) for c in range(classes)]


def seed_run(train: Callable[[], tuple[Any, History]], predict: Callable[[Any], Any],
             test_images: Any, test_labels: Any) -> SeedRun:
    """``train()`` (which returns the trained model and its history), then its test accuracy per
    class: ``predict(model, test_images)`` against ``test_labels``."""
    model, history = train()
    return SeedRun(history, per_class_accuracy(predict(model, test_images), test_labels))


def _build(build: Callable[[str], Any], tools: tuple[str, ...]) -> dict[str, Any]:
    """The ladder's contestants, one per tool, in order (``timing.ladder``'s builder returns it)."""
    return {name: build(name) for name in tools}


def ladder(build: Callable[[str], Any], breaks: Callable[[str], int] | None,
           tools: Sequence[str], *, needs: Mapping[str, str], repeats: int, steps_per_call: int,
           steps_per_epoch: int, precision: str = "float32",
           processes: int | None = None) -> dict[str, Any]:
    """One model's ladder in one precision, timed in every process of the run
    (:func:`sidebyside.lab.timing.ladder`), as :func:`report.speed_record` makes it a workload of
    ``metrics["speed"]``.

    ``build(name)`` builds the rung ``name`` of ``tools`` (in a worker process too: it must pickle
    with cloudpickle), or returns why it cannot run (:class:`sidebyside.lab.timing.NotApplicable`)
    or the error building it raised; ``breaks(mode)`` counts the graph breaks of the compiled step
    under a ``torch.compile`` mode, kept as ``graph_breaks`` in each :data:`COMPILED` rung that ran
    (None, or a count that raises: no count). ``needs``, ``repeats``, ``processes``: as
    :func:`timing.ladder`'s (``processes`` None: the run profile's); each timed call trains
    ``steps_per_call`` steps, scaled to ``steps_per_epoch``."""
    if not tools:
        raise ValueError("a ladder needs at least one tool; name them as report.ladder_tools "
                         "gives them")
    entries, _ = timing.ladder(functools.partial(_build, build, tuple(tools)), needs=needs,
                               repeats=repeats, processes=processes)
    for name, mode in COMPILED.items():
        if breaks is not None and name in entries and entries[name]["median_s"] is not None:
            with contextlib.suppress(Exception):  # no count is no reason to drop the rung
                entries[name]["graph_breaks"] = int(breaks(mode))
    return report.speed_record(entries, steps_per_call=steps_per_call,
                               steps_per_epoch=steps_per_epoch, precision=precision)
