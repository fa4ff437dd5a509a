"""sidebyside.posts.jit_autograd.kernels: the device events are summed right (synthetic events and a real CPU
trace, on any machine), and on a GPU a matmul's kernel time is positive and within its
synchronised per-call time, in each framework."""

from __future__ import annotations

import pytest

from sidebyside.lab import timing
from sidebyside.posts.jit_autograd import kernels


def _torch_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _jax_gpu() -> bool:
    import jax

    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:
        return False


# The GPU checks of JAX's profiler come first in this file: once PyTorch's profiler has run in a process (even
# a trace of CPU operators only), JAX's cannot subscribe to CUPTI (seen on a GPU box with PyTorch 2.11 and JAX
# 0.11), so `measure` profiles JAX's candidates first too
@pytest.mark.skipif(not _jax_gpu(), reason="kernel time needs a CUDA GPU")
def test_jax_matmul_kernel_time_is_positive_and_within_the_synchronised_call():
    import jax
    import jax.numpy as jnp

    a = jax.device_put(jnp.ones((2048, 2048), jnp.float32), jax.devices("gpu")[0])
    f = jax.jit(lambda m: m @ m)
    call = timing.time_fn(lambda: f(a), repeats=5)
    k = kernels.jax_kernel_time(lambda: f(a), calls=10)
    assert 0 < k.kernel_s <= call.median_s
    assert k.kernels_per_call >= 1 and k.top


@pytest.mark.skipif(not (_torch_cuda() and _jax_gpu()), reason="kernel time needs a CUDA GPU")
def test_measure_times_both_frameworks_kernels_in_one_process():
    import jax
    import jax.numpy as jnp
    import torch

    a = torch.randn(1024, 1024, device="cuda")
    b = jax.device_put(jnp.ones((1024, 1024), jnp.float32), jax.devices("gpu")[0])
    f = jax.jit(lambda m: m @ m)
    rows = kernels.measure({"torch/eager": lambda: a @ a, "jax/jit": lambda: f(b)}, calls=5)
    assert all(r["error"] is None and r["kernel_s"] > 0 for r in rows.values()), rows


def test_summarise_divides_by_the_calls_and_ranks_the_kernels():
    events = [("gemm", 3e-6), ("add", 1e-6), ("gemm", 5e-6), ("add", 1e-6), ("exp", 0.5e-6)]
    k = kernels.summarise(events, [("Memcpy DtoD", 2e-6)], calls=2, top=2)
    assert k.kernel_s == pytest.approx(10.5e-6 / 2) and k.copy_s == pytest.approx(1e-6)
    assert k.device_s == pytest.approx(k.kernel_s + 1e-6)
    assert k.kernels_per_call == pytest.approx(2.5)
    assert [name for name, _, _ in k.top] == ["gemm", "add"]  # the largest first, cut at `top`
    assert k.top[0][1:] == pytest.approx((4e-6, 1.0))
    row = k.to_dict()
    assert row["top"][1] == {"name": "add", "s": pytest.approx(1e-6), "count": 1.0} and row["calls"] == 2
    with pytest.raises(ValueError, match="calls must be >= 1"):
        kernels.summarise(events, calls=0)


def _function_event(name, *, device, activity, start_us=0.0, end_us=1.0, index=0, typed=True):
    """A profiler event as this PyTorch makes it; ``typed=False``: without its activity type, as
    PyTorch releases that do not keep it (2.11 among them) give it."""
    import inspect

    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEvent

    accepts = inspect.signature(FunctionEvent).parameters
    extra = {"activity_type": activity} if typed and "activity_type" in accepts else {}
    if "is_user_annotation" in accepts:
        extra["is_user_annotation"] = activity == "gpu_user_annotation"
    event = FunctionEvent(id=0, name=name, thread=0, start_us=start_us, end_us=end_us, use_device="cuda",
                          device_type=DeviceType.CUDA if device == "cuda" else DeviceType.CPU, device_index=index,
                          **extra)
    if not typed and hasattr(event, "activity_type"):
        event.activity_type = None
    return event


@pytest.mark.parametrize("typed", [True, False], ids=["activity-type", "no-activity-type"])
def test_torch_picks_the_kernels_on_the_device_and_ignores_host_events(typed):
    import functools

    import torch
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(64, 64)
    with profile(activities=[ProfilerActivity.CPU]) as prof:  # a real trace: CPU operators only
        for _ in range(3):
            x @ x
    host = list(prof.events())
    assert host and any(e.name == "aten::mm" for e in host)
    event = functools.partial(_function_event, typed=typed)
    device = [
        event("gemm_kernel", device="cuda", activity="kernel", end_us=30.0),
        event("gemm_kernel", device="cuda", activity="kernel", start_us=40.0, end_us=70.0),
        event("elementwise", device="cuda", activity="kernel", start_us=80.0, end_us=85.0),
        event("Memcpy DtoD (Device -> Device)", device="cuda", activity="gpu_memcpy", end_us=4.0),
        event("Memset (Device)", device="cuda", activity="gpu_memset", end_us=1.0),
        # a span that covers kernels (counting it would count them twice), and another GPU's kernel
        event("## step ##", device="cuda", activity="gpu_user_annotation", end_us=90.0),
        event("other_gpu", device="cuda", activity="kernel", end_us=500.0, index=1),
        event("cudaLaunchKernel", device="cpu", activity="cuda_runtime", end_us=7.0),
    ]
    found, copies = kernels.torch_device_events(host + device)
    assert [(name, round(seconds * 1e6, 6)) for name, seconds in found] == [
        ("gemm_kernel", 30.0), ("gemm_kernel", 30.0), ("elementwise", 5.0)]
    assert [name for name, _ in copies] == ["Memcpy DtoD (Device -> Device)", "Memset (Device)"]
    assert kernels.torch_device_events(host) == ([], [])
    k = kernels.summarise(found, copies, calls=1)
    assert k.kernel_s == pytest.approx(65e-6) and k.copy_s == pytest.approx(5e-6) and k.kernels_per_call == 3


def _plane(plane_id: int, name: str, lines: dict[str, list[tuple[str, float, str | None]]]) -> str:
    """One XSpace plane in protobuf text: ``lines`` maps a line's name to its events, each
    ``(event name, microseconds, the name of the one statistic it carries, or None)``."""
    names = sorted({event for events in lines.values() for event, _, _ in events})
    stats = sorted({stat for events in lines.values() for _, _, stat in events if stat})
    text = f'planes {{ id: {plane_id} name: "{name}"\n'
    for line_id, (line, events) in enumerate(lines.items(), 1):
        text += f'  lines {{ id: {line_id} name: "{line}"\n'
        for offset, (event, us, stat) in enumerate(events):
            text += (f"    events {{ metadata_id: {names.index(event) + 1} offset_ps: {offset * 10**7} "
                     f"duration_ps: {round(us * 10**6)}"
                     + (f' stats {{ metadata_id: {stats.index(stat) + 1} str_value: "x" }}' if stat else "") + " }\n")
        text += "  }\n"
    text += "".join(f'  event_metadata {{ key: {i} value {{ id: {i} name: "{n}" }} }}\n' for i, n in enumerate(names, 1))
    text += "".join(f'  stat_metadata {{ key: {i} value {{ id: {i} name: "{n}" }} }}\n' for i, n in enumerate(stats, 1))
    return text + "}\n"


_XSPACE = (
    # a host event that even carries the kernel statistic: not on the device plane, left out
    _plane(1, "/host:CPU", {"python": [("fusion_on_host", 90.0, "kernel_details")]})
    + _plane(2, "/device:GPU:0", {
        "Stream #13(Compute)": [("loop_fusion", 4.0, "kernel_details"), ("gemm_fusion", 6.0, "kernel_details"),
                                ("loop_fusion", 4.0, "kernel_details")],
        "Stream #14(MemcpyD2D)": [("MemcpyD2D", 2.0, "memcpy_details")],
        # derived from the kernels: the same time again, without the kernel statistic
        "XLA Ops": [("loop_fusion", 4.0, None), ("gemm_fusion", 6.0, None)]})
    + _plane(3, "/device:GPU:1", {"Stream #7(Compute)": [("elsewhere", 800.0, "kernel_details")]})
)


def test_jax_picks_the_kernels_of_the_device_plane_only():
    import jax

    profile = jax.profiler.ProfileData.from_text_proto(_XSPACE)
    found, copies = kernels.jax_device_events(profile)
    assert found == [("loop_fusion", pytest.approx(4e-6)), ("gemm_fusion", pytest.approx(6e-6)),
                     ("loop_fusion", pytest.approx(4e-6))]
    assert copies == [("MemcpyD2D", pytest.approx(2e-6))]
    k = kernels.summarise(found, copies, calls=2)
    assert k.kernel_s == pytest.approx(7e-6) and k.kernels_per_call == pytest.approx(1.5)
    assert k.top[0][0] == "loop_fusion"
    assert [name for name, _ in kernels.jax_device_events(profile, gpu=1)[0]] == ["elsewhere"]


def test_a_real_cpu_trace_of_jax_has_host_events_and_no_kernel():
    import jax
    import jax.numpy as jnp

    f = jax.jit(lambda v: jnp.sin(v) @ v)
    x = jnp.ones((64, 64), jnp.float32)
    profile = kernels.collect_jax(lambda: f(x), calls=3, gpu=None)  # no GPU needed: a trace of what runs
    host = [event for plane in profile.planes if plane.name.startswith("/host:") for line in plane.lines
            for event in line.events]
    assert host  # the trace holds events, on the host
    if not _jax_gpu():
        assert kernels.jax_device_events(profile) == ([], [])


@pytest.mark.skipif(_torch_cuda(), reason="checks the message given on a machine without a CUDA GPU")
def test_without_a_gpu_kernel_time_says_it_needs_one():
    with pytest.raises(timing.NotApplicable, match="kernel time needs a CUDA GPU"):
        kernels.torch_kernel_time(lambda: None)
    if not _jax_gpu():
        with pytest.raises(timing.NotApplicable, match="kernel time needs a CUDA GPU"):
            kernels.jax_kernel_time(lambda: None)
        rows = kernels.measure({"torch/eager": lambda: None, "jax/jit": lambda: None, "numpy/numpy": lambda: None})
        assert list(rows) == ["torch/eager", "jax/jit", "numpy/numpy"]
        assert all(r["not_applicable"] and r["error"] is None for r in rows.values())
        assert "PyTorch and JAX only" in rows["numpy/numpy"]["not_applicable"]


def test_measure_keeps_a_failing_profile_as_its_rows_error(monkeypatch):
    def broken(fn, **_):
        raise RuntimeError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")

    def fine(fn, **kw):
        return kernels.summarise([("k", 2e-6)], calls=1)

    monkeypatch.setitem(kernels._BY_FRAMEWORK, "torch", broken)
    monkeypatch.setitem(kernels._BY_FRAMEWORK, "jax", fine)
    rows = kernels.measure({"torch/eager": lambda: None, "jax/jit": lambda: None,
                            "torch/compile-cudagraphs": timing.NotApplicable("CUDA graphs need a CUDA GPU")})
    assert rows["torch/eager"] == {"error": "RuntimeError: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED",
                                   "not_applicable": None}
    assert rows["jax/jit"]["kernel_s"] == pytest.approx(2e-6) and rows["jax/jit"]["error"] is None
    assert rows["torch/compile-cudagraphs"]["not_applicable"] == "CUDA graphs need a CUDA GPU"


def test_measure_profiles_jax_first_and_keeps_the_candidates_order(monkeypatch):
    profiled = []

    def record(framework):
        def kernel_time(fn, **_):
            profiled.append(framework)
            return kernels.summarise([("k", 1e-6)], calls=1)
        return kernel_time

    for framework in ("torch", "jax"):
        monkeypatch.setitem(kernels._BY_FRAMEWORK, framework, record(framework))
    rows = kernels.measure({"torch/eager": lambda: None, "jax/jit": lambda: None, "torch/compile": lambda: None,
                            "jax/scan": lambda: None})
    assert profiled == ["jax", "jax", "torch", "torch"]
    assert list(rows) == ["torch/eager", "jax/jit", "torch/compile", "jax/scan"]


@pytest.mark.skipif(not _torch_cuda(), reason="kernel time needs a CUDA GPU")
def test_torch_matmul_kernel_time_is_positive_and_within_the_synchronised_call():
    import torch

    a = torch.randn(2048, 2048, device="cuda")
    call = timing.time_fn(lambda: a @ a, repeats=5)
    k = kernels.torch_kernel_time(lambda: a @ a, calls=10)
    assert 0 < k.kernel_s <= call.median_s
    assert k.kernels_per_call >= 1 and k.top
