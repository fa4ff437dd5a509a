"""Collectives per training step, counted the same way for both frameworks.

Each collective becomes a :class:`Collective`: its ``kind`` (``all-reduce``, ``reduce-scatter``,
``all-gather``, ``all-to-all``, ``collective-permute``), the ``bytes`` of the full buffer it works
on (all-reduce: the buffer reduced; all-gather: the gathered result; reduce-scatter: the buffer
before scattering; all-to-all: the buffer exchanged), and the ``group`` size g (devices taking
part: the HLO's ``replica_groups`` on JAX, the process group's size on PyTorch). Bytes on the wire
per device are the ring algorithms' (:func:`wire_factor`): all-reduce 2(g-1)/g of the buffer,
all-gather, reduce-scatter and all-to-all (g-1)/g, collective-permute the whole buffer.

- :func:`parse_hlo`: JAX's side, from the text of a compiled XLA program. Async pairs
  (``all-reduce-start`` / ``-done``) count once; a tuple-shaped collective (XLA's combiner
  merges several) counts once with the bytes of all its operands.
- :func:`torch_collective`: PyTorch's side, one call at a time, as ``torch_parallel`` records them
  (c10d operators through a ``TorchDispatchMode``, DDP's buckets through a communication hook).
- :func:`summarise`: count, buffer bytes and wire bytes per kind.

Pure functions over text and tuples: no framework is imported here.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Sequence

__all__ = ["Collective", "KINDS", "wire_factor", "parse_hlo", "torch_collective", "summarise"]

KINDS = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all", "collective-permute")

_DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4,
                "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
_SHAPE = re.compile(r"\b(" + "|".join(_DTYPE_BYTES) + r")\[([0-9,]*)\]")
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(?P<result>.*?)\s+(?P<op>" + "|".join(KINDS)
                    + r")(?P<start>-start)?\((?P<operands>.*?)\)(?P<attrs>.*)$")
_GROUPS_LIST = re.compile(r"replica_groups=\{\{([0-9,]*)\}")
_GROUPS_IOTA = re.compile(r"replica_groups=\[(\d+),(\d+)\]<=")
_GROUPS_MESH = re.compile(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}")
_PAIRS = re.compile(r"source_target_pairs=\{((?:\{\d+,\d+\},?)*)\}")


@dataclasses.dataclass(frozen=True)
class Collective:
    """One collective in one training step (see the module docstring for ``bytes``)."""

    kind: str
    bytes: int
    group: int | None = None

    @property
    def wire_bytes(self) -> float:
        """Bytes each device sends by the ring algorithm (:func:`wire_factor` times ``bytes``);
        ValueError when the group size is unknown."""
        if self.group is None:
            raise ValueError(f"a {self.kind} of {self.bytes} bytes without a group size has no "
                             "wire bytes")
        return wire_factor(self.kind, self.group) * self.bytes


def wire_factor(kind: str, group: int) -> float:
    """The share of a collective's full buffer that each of ``group`` devices sends on the wire by
    the ring algorithm: all-reduce 2(g-1)/g (a reduce-scatter then an all-gather), all-gather,
    reduce-scatter and all-to-all (g-1)/g, collective-permute 1; 0 for a group of one."""
    if kind not in KINDS:
        raise ValueError(f"unknown collective {kind!r}; known: {list(KINDS)}")
    if group < 1:
        raise ValueError(f"a group has at least one device, got {group}")
    if group == 1:
        return 0.0
    if kind == "collective-permute":
        return 1.0
    return (2 if kind == "all-reduce" else 1) * (group - 1) / group


def _shape_bytes(text: str) -> list[int]:
    """Bytes of every array shape written in ``text`` (``f32[64,128]{1,0}`` -> 32768)."""
    return [_DTYPE_BYTES[dtype] * math.prod(int(d) for d in dims.split(",") if d) for dtype, dims in
            _SHAPE.findall(text)]


def _group(attrs: str) -> int | None:
    """Devices per group, from any of XLA's three spellings of ``replica_groups``: listed
    (``{{0,1},{2,3}}``), iota (``[2,2]<=[4]``) or mesh axes (``mesh['a'=2,'b'=4] {'b'}``)."""
    mesh = _GROUPS_MESH.search(attrs)
    if mesh:
        sizes = {name: int(size) for name, size in re.findall(r"'([^']+)'=(\d+)", mesh.group(1))}
        return math.prod(sizes[name] for name in re.findall(r"'([^']+)'", mesh.group(2)))
    iota = _GROUPS_IOTA.search(attrs)
    if iota:
        return int(iota.group(2))
    listed = _GROUPS_LIST.search(attrs)
    if listed:
        return len([d for d in listed.group(1).split(",") if d])
    return None


def parse_hlo(text: str) -> list[Collective]:
    """The collectives in a compiled XLA program's text, in program order.

    Raises ValueError on a collective line whose shapes cannot be read, rather than counting it
    as zero bytes."""
    found = []
    for line in text.splitlines():
        match = _INSTR.match(line)
        if not match:
            continue
        op, attrs = match["op"], match["attrs"]
        result, operands = _shape_bytes(match["result"]), _shape_bytes(match["operands"])
        if not result and not operands:
            raise ValueError(f"cannot read the shapes of this collective: {line.strip()[:200]}")
        if match["start"] and op in ("all-reduce", "collective-permute"):
            # An async start's result repeats its operands (and may add context): count the operands.
            size = sum(operands) if operands else sum(result)
        elif op == "all-gather":
            if not operands:  # operands printed by name alone: the largest result is gathered
                size = max(result) if match["start"] else sum(result)
            else:
                size = sum(result) - (sum(operands) if match["start"] else 0)
        elif op == "reduce-scatter":
            size = sum(operands) if operands else None
        else:
            size = sum(operands) if operands else sum(result)
        group = _group(attrs)
        if size is None:  # operands printed by name alone: the scattered result times the group
            if group is None:
                raise ValueError("cannot read the buffer of this reduce-scatter: "
                                 f"{line.strip()[:200]}")
            size = sum(result) * group
        if group is None and op == "collective-permute":
            pairs = _PAIRS.search(attrs)
            group = len(set(re.findall(r"\d+", pairs.group(1)))) if pairs else None
        found.append(Collective(op, size, group))
    return found


_TORCH_OPS = {
    "allreduce": "all-reduce", "all_reduce": "all-reduce",
    "allgather": "all-gather", "all_gather": "all-gather", "_allgather_base": "all-gather",
    "allgather_into_tensor": "all-gather", "all_gather_into_tensor": "all-gather",
    "reduce_scatter": "reduce-scatter", "_reduce_scatter_base": "reduce-scatter",
    "reduce_scatter_tensor": "reduce-scatter", "alltoall": "all-to-all", "alltoall_base": "all-to-all",
    "all_to_all": "all-to-all", "all_to_all_single": "all-to-all",
}
_API = re.compile(r"^(?:c10d|_c10d_functional)::(?P<op>[a-z_]+?)(?:_coalesced)?_?$")


def torch_collective(op: str, sizes: Sequence[int], group: int | None = None) -> Collective | None:
    """One PyTorch collective call as a :class:`Collective`: ``op`` is the dispatched operator's
    name (``c10d::allreduce_``, ``c10d::_allgather_base_``, ``_c10d_functional::all_reduce``) or a
    plain kind (``all-reduce``); ``sizes`` the bytes of its tensor arguments, of which the largest
    is the full buffer (the module's convention); ``group`` the size of its process group. None for
    an operator that is no collective."""
    if op in KINDS:
        return Collective(op, max(sizes, default=0), group)
    match = _API.match(op)
    if not match or match["op"].rstrip("_") not in _TORCH_OPS:
        return None
    return Collective(_TORCH_OPS[match["op"].rstrip("_")], max(sizes, default=0), group)


def summarise(collectives: Iterable[Collective]) -> dict[str, dict[str, float]]:
    """``{kind: {"count": n, "bytes": buffer bytes, "wire_bytes": bytes each device sends}}`` for
    each kind present, plus ``"total"``; ``groups``: the group sizes seen, per kind."""
    out: dict[str, dict] = {}
    for c in collectives:
        entry = out.setdefault(c.kind, {"count": 0, "bytes": 0, "wire_bytes": 0.0, "groups": []})
        entry["count"] += 1
        entry["bytes"] += c.bytes
        entry["wire_bytes"] += c.wire_bytes
        if c.group not in entry["groups"]:
            entry["groups"].append(c.group)
    out["total"] = {key: sum(e[key] for e in out.values())
                    for key in ("count", "bytes", "wire_bytes")}
    return out
