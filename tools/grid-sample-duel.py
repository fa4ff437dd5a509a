"""The native grid_sample kernel against PyTorch's CPU kernel, kernel against kernel.

    PYTHONPATH=src .venv/bin/python tools/grid-sample-duel.py [--shape N,C,H,W ...] [--modes ...] [--backward]

Builds tools/grid_sample_duel.cc (the kernel's C++ source included whole, linked against the
libtorch of this environment) into build/grid-sample-duel/ and runs it per shape and mode: both
kernels on one thread, on the same memory, their repeats interleaved, inputs from
``sidebyside.grid_sample.bench.inputs`` (a random affine warp). It prints each side's median time,
the median ratio with its quartiles and whether the outputs are the same bits; with
``--backward``, the backward passes (``BackwardBatch`` against ``at::grid_sampler_2d_backward``,
both gradients, on a random cotangent) and each gradient's largest error relative to PyTorch's
largest value, since the two sum in different orders. Nothing else of either framework is timed
(dispatch, thread pools, allocation): this is how the kernel's loop orders were chosen
(``ForwardBatch`` and ``BackwardBatch`` in grid_sample_cpu.cc); ``python -m sidebyside.posts.bench
grid_sample`` times what a user sees.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tools" / "grid_sample_duel.cc"
MODES = {"nearest": 0, "bilinear": 1, "bicubic": 2}
PADDINGS = {"zeros": 0, "border": 1, "reflection": 2}
SHAPES = ["8,3,128,128", "64,3,128,128", "2,16,128,128", "4,64,64,64"]


def build(out_dir: Path) -> Path:
    """Compile the duel; returns the executable. Raises SystemExit with the compiler's error."""
    import jax
    import torch

    from sidebyside.grid_sample import native

    try:
        compiler = native.compiler()
    except native.NativeBuildError as error:
        raise SystemExit(str(error)) from None
    torch_dir = Path(torch.__file__).parent
    flags = [f for f in native.FLAGS if f not in ("-shared", "-fPIC") and not f.startswith("-std=")]
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / "grid_sample_duel"
    command = [compiler, *flags, "-std=c++20",  # PyTorch's headers need C++20
               f'-DKERNEL_SOURCE="{native.SOURCE}"', "-isystem", jax.ffi.include_dir(),
               "-isystem", str(torch_dir / "include"), "-o", str(target), str(SOURCE),
               f"-L{torch_dir / 'lib'}", "-ltorch_cpu", "-lc10", f"-Wl,-rpath,{torch_dir / 'lib'}"]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"building the duel failed ({' '.join(command)}):\n{result.stderr[-3000:]}")
    return target


def duel(executable: Path, shape: tuple[int, ...], mode: str, *, padding: str = "zeros", align_corners: bool = False,
         repeats: int = 21, backward: bool = False, work_dir: Path) -> dict:
    """One shape and mode: ``{"ours_ms", "torch_ms", "ratio", "q1", "q3"}`` and ``"same_bits"``
    (forward) or ``"grad_input_rel_err", "grad_grid_rel_err"`` (backward)."""
    import numpy as np

    from sidebyside.grid_sample.bench import inputs

    x, grid = inputs(shape)
    x.tofile(work_dir / "x.bin")
    grid.tofile(work_dir / "g.bin")
    np.random.default_rng(1).standard_normal(x.shape, dtype=np.float32).tofile(work_dir / "c.bin")
    args = [str(executable), *map(str, shape), str(MODES[mode]), str(PADDINGS[padding]), str(int(align_corners)),
            str(repeats), str(int(backward))]
    out = subprocess.run(args, capture_output=True, text=True, cwd=work_dir, check=True).stdout.split()
    row = dict(zip(out[::2], (float(v) for v in out[1::2])))
    if "same_bits" in row:
        row["same_bits"] = bool(row["same_bits"])
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", action="append", help=f"N,C,H,W (repeatable; default: {' '.join(SHAPES)})")
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--padding", choices=list(PADDINGS), default="zeros")
    parser.add_argument("--align-corners", action="store_true")
    parser.add_argument("--backward", action="store_true", help="time the backward passes instead of the forward")
    parser.add_argument("--repeats", type=int, default=21, help="interleaved repeats of 5 calls per side")
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build" / "grid-sample-duel")
    args = parser.parse_args(argv)
    shapes = [tuple(int(v) for v in s.split(",")) for s in (args.shape or SHAPES)]
    if any(len(s) != 4 for s in shapes):
        parser.error("--shape takes four numbers, N,C,H,W (the duel is 2-D only)")
    executable = build(args.build_dir)
    print(f"{'backward' if args.backward else 'forward'}, one thread each, medians of {args.repeats} interleaved "
          "repeats; ratio: ours / PyTorch's, with quartiles")
    for shape in shapes:
        for mode in args.modes:
            r = duel(executable, shape, mode, padding=args.padding, align_corners=args.align_corners,
                     repeats=args.repeats, backward=args.backward, work_dir=args.build_dir)
            check = (f"same bits: {r['same_bits']}" if "same_bits" in r else
                     f"largest error / largest value: input {r['grad_input_rel_err']:.2g}, "
                     f"grid {r['grad_grid_rel_err']:.2g}")
            print(f"{'x'.join(map(str, shape)):>14} {mode:8} ours {r['ours_ms']:8.3f} ms  PyTorch {r['torch_ms']:8.3f} ms"
                  f"  ratio {r['ratio']:.3f} [{r['q1']:.3f}, {r['q3']:.3f}]  {check}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
