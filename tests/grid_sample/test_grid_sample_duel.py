"""tools/grid-sample-duel.py: the native kernel against PyTorch's CPU kernel in one process.
It builds against this environment's libtorch and runs; nearest's forward, which involves no
arithmetic on the values, gives PyTorch's bits exactly, in every padding; the backward
passes agree with PyTorch's to float32 rounding."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("grid_sample_duel", ROOT / "tools" / "grid-sample-duel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_duel_builds_runs_and_nearest_is_pytorchs_bits(tmp_path):
    from sidebyside.grid_sample import native

    if not native.available():
        pytest.skip("the native kernel cannot be built here")
    tool = _tool()
    executable = tool.build(tmp_path)
    for padding in ("zeros", "border", "reflection"):
        # 9 channels: two blocks of 4 and a part block; 50 points a row: a tail of 2 the scalar way
        row = tool.duel(executable, (2, 9, 13, 50), "nearest", padding=padding, repeats=3, work_dir=tmp_path)
        assert row["same_bits"], (padding, row)
        assert row["ours_ms"] > 0 and row["torch_ms"] > 0 and row["ratio"] > 0
    row = tool.duel(executable, (2, 3, 13, 50), "bilinear", repeats=3, work_dir=tmp_path)
    assert row["ours_ms"] > 0 and set(row) == {"ours_ms", "torch_ms", "ratio", "q1", "q3", "same_bits"}
    for mode in ("nearest", "bilinear", "bicubic"):
        for padding in ("zeros", "reflection"):
            row = tool.duel(executable, (2, 9, 13, 50), mode, padding=padding, repeats=3, backward=True,
                            work_dir=tmp_path)
            assert set(row) == {"ours_ms", "torch_ms", "ratio", "q1", "q3", "grad_input_rel_err",
                                "grad_grid_rel_err"}, row
            assert row["grad_input_rel_err"] < 1e-5 and row["grad_grid_rel_err"] < 1e-5, (mode, padding, row)


def test_duel_refuses_a_shape_that_is_not_2d(capsys):
    with pytest.raises(SystemExit):
        _tool().main(["--shape", "1,2,3,4,5"])
    assert "four numbers" in capsys.readouterr().err


def test_duel_says_what_to_install_without_a_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler")
    with pytest.raises(SystemExit, match="apt-get install g\\+\\+"):
        _tool().build(tmp_path)
    assert not list(tmp_path.iterdir())
