"""A cost model that projects a measured training step to many H100s: a projection, never a measurement.

Inputs (each listed by :func:`inputs_table` with its source or "assumption"):

- compute: ``6 x parameters x tokens`` FLOPs per sample (forward and backward; Kaplan et al. 2020,
  "Scaling Laws for Neural Language Models", sec. 2.1), at ``efficiency`` of the H100 SXM's dense
  FP32 peak (the post trains in float32 with TF32 off);
- communication: the collectives measured per step (kind, buffer bytes), each timed by the ring
  algorithm: its bytes on the wire per device (:func:`.comms.wire_factor`: all-reduce
  ``2 (g-1)/g``, all-gather, reduce-scatter and all-to-all ``(g-1)/g`` of the buffer) over the
  bandwidth, plus a fixed ``latency`` per collective;
- links: a group inside one 8-GPU node uses NVLink 4, a group that spans nodes is bound by each
  GPU's InfiniBand NDR port (a hierarchical algorithm cannot beat its slowest link);
- scaling: weak, the per-device batch of the measured run held fixed, so each collective's
  bytes stay as measured; groups span every device, except for the 2-D strategy whose model axis
  (``model_parallel`` devices, inside a node) carries the activations and whose data axis
  (``N / model_parallel``, across nodes) carries the gradients (the bytes of the gradients one
  device holds).

Outputs per device count: compute seconds, communication seconds, the step time with no overlap
(their sum) and with perfect overlap (the larger), and the scaling efficiency (compute over step).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from sidebyside.posts.parallel_training import comms

__all__ = ["H100", "Hardware", "ring_seconds", "project", "inputs_table"]


@dataclasses.dataclass(frozen=True)
class Hardware:
    """A GPU and its links, each figure with where it comes from."""

    name: str
    peak_flops: float
    nvlink_bytes_per_s: float
    network_bytes_per_s: float
    gpus_per_node: int
    latency_s: float
    efficiency: float
    sources: Mapping[str, str]


H100 = Hardware(
    name="NVIDIA H100 SXM5 80GB",
    peak_flops=67e12,
    nvlink_bytes_per_s=450e9,
    network_bytes_per_s=50e9,
    gpus_per_node=8,
    latency_s=10e-6,
    efficiency=0.5,
    sources={
        "peak_flops": "NVIDIA H100 Tensor Core GPU datasheet: FP32 67 TFLOP/s (SXM)",
        "nvlink_bytes_per_s": "NVIDIA H100 datasheet: NVLink 900 GB/s per GPU, both directions (450 GB/s each way)",
        "network_bytes_per_s": ("NVIDIA DGX H100 datasheet: 8 ConnectX-7 ports, InfiniBand NDR 400 Gb/s "
                                "(50 GB/s) per GPU"),
        "gpus_per_node": "NVIDIA DGX H100 datasheet: 8 H100 GPUs per node",
        "latency_s": "assumption: 10 µs per collective (launch and synchronisation)",
        "efficiency": "assumption: 50% of peak FLOP/s reached by the model's matmuls",
    },
)

def ring_seconds(kind: str, nbytes: float, group: int, bandwidth: float) -> float:
    """Seconds one ring collective of ``kind`` over ``group`` devices moves ``nbytes`` (the full
    buffer) at ``bandwidth`` bytes/s per device, without latency (the bytes on the wire are
    :func:`.comms.wire_factor`'s); 0 for a group of one."""
    return comms.wire_factor(kind, max(group, 1)) * nbytes / bandwidth


def _bandwidth(group: int, hw: Hardware, *, spans_nodes: bool) -> float:
    return hw.network_bytes_per_s if spans_nodes and group > 1 else hw.nvlink_bytes_per_s


def project(strategy: str, *, collectives: Sequence[Mapping[str, Any]], grad_bytes: int, measured_devices: int,
            params: int, tokens_per_device: int, model_parallel: int, device_counts: Sequence[int] = (8, 64, 512),
            hw: Hardware = H100) -> dict[int, dict[str, float]]:
    """Project one strategy's step (its measured ``collectives`` per step, each ``{"kind", "bytes"}``,
    at ``measured_devices``) to each of ``device_counts`` GPUs; see the module docstring."""
    compute = 6 * params * tokens_per_device / (hw.peak_flops * hw.efficiency)
    out = {}
    for n in device_counts:
        spans = n > hw.gpus_per_node
        comm = hw.latency_s * len(collectives)
        if strategy == "one_device":
            comm = 0.0
        elif strategy == "tensor_parallel":
            data_now = measured_devices // model_parallel
            data_bytes = grad_bytes if data_now > 1 else 0
            model_bytes = sum(c["bytes"] for c in collectives if c["kind"] == "all-reduce") - data_bytes
            comm += ring_seconds("all-reduce", model_bytes, model_parallel, hw.nvlink_bytes_per_s)
            data_n = n // model_parallel
            comm += ring_seconds("all-reduce", grad_bytes, data_n, _bandwidth(data_n, hw, spans_nodes=spans))
            comm += sum(ring_seconds(c["kind"], c["bytes"], model_parallel, hw.nvlink_bytes_per_s)
                        for c in collectives if c["kind"] != "all-reduce")
        else:
            bandwidth = _bandwidth(n, hw, spans_nodes=spans)
            comm += sum(ring_seconds(c["kind"], c["bytes"], n, bandwidth) for c in collectives)
        out[n] = {"compute_s": compute, "comm_s": comm, "step_no_overlap_s": compute + comm,
                  "step_overlap_s": max(compute, comm), "efficiency_no_overlap": compute / (compute + comm),
                  "efficiency_overlap": compute / max(compute, comm)}
    return out


def inputs_table(hw: Hardware = H100, *, params: int, tokens_per_device: int, model_parallel: int):
    """The projection's inputs as a pandas DataFrame: name, value, source."""
    import pandas as pd

    rows = [
        ("GPU", hw.name, "NVIDIA H100 datasheet"),
        ("peak FLOP/s (FP32, dense)", f"{hw.peak_flops / 1e12:g} TFLOP/s", hw.sources["peak_flops"]),
        ("share of peak reached", f"{hw.efficiency:.0%}", hw.sources["efficiency"]),
        ("NVLink bandwidth per GPU, each way", f"{hw.nvlink_bytes_per_s / 1e9:g} GB/s", hw.sources["nvlink_bytes_per_s"]),
        ("InfiniBand bandwidth per GPU, each way", f"{hw.network_bytes_per_s / 1e9:g} GB/s",
         hw.sources["network_bytes_per_s"]),
        ("GPUs per node", str(hw.gpus_per_node), hw.sources["gpus_per_node"]),
        ("latency per collective", f"{hw.latency_s * 1e6:g} µs", hw.sources["latency_s"]),
        ("collective algorithm", "ring", "assumption: NCCL's ring bound; trees cut latency, not bytes"),
        ("FLOPs per step per device", f"6 × {params:,} parameters × {tokens_per_device:,} tokens",
         "Kaplan et al. 2020, sec. 2.1"),
        ("scaling", "weak: the measured per-device batch, fixed", "assumption"),
        ("model axis of the 2-D strategy", f"{model_parallel} GPUs, inside a node (NVLink)", "assumption"),
        ("bytes per collective", "as measured per step on this run (HLO; profiler)", "this run"),
    ]
    return pd.DataFrame(rows, columns=["input", "value", "source"]).set_index("input")
