"""Docstrings and comments are contracts, not diaries: what a
function takes and returns and why it is built so. A measured figure, a past
run or a tuning history goes stale with the next release; figures live in the
results records, history in git.

This test reads every comment and docstring of the library (Python and the C++
kernel) and fails on a measured time or ratio next to a word that reports a
measurement ("measured", "took", "timed", ...), and on a named machine ("H100",
"EPYC", ...) anywhere in ``src/`` outside the data-sheet tables (:data:`DATASHEETS`:
``lab/peaks.py``, and a post's table of the hardware it projects onto), the places
where a machine's data-sheet figures belong.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest
from conftest import ROOT

SRC = ROOT / "src" / "sidebyside"
PEAK_TABLES = SRC / "lab" / "peaks.py"
#: Modules that are tables of a machine's data-sheet figures (each line cites its data sheet).
DATASHEETS = {PEAK_TABLES, SRC / "posts" / "parallel_training" / "costmodel.py"}

_NUMBER = r"\d+(?:[.,]\d+)?(?:\s?-\s?\d+(?:\.\d+)?)?"
#: A time (``82 us``, ``0.51 ms``, ``45-190 us``) or a ratio of times (``1.085x``, ``0.80-0.88x``).
_FIGURE = rf"(?:{_NUMBER}\s?(?:us|µs|ms|ns)\b|\b{_NUMBER}\s?x(?=[\s,.;:)]|$)(?!\s?\d))"
_REPORTING = r"\b(?:measured|measures?|took|takes|timed|ran|runs?|costs?)\b"
#: A figure within one clause of a word that reports it, on either side.
MEASURED = re.compile(rf"{_REPORTING}[^.;\n]{{0,80}}?{_FIGURE}|{_FIGURE}[^.;\n]{{0,40}}?{_REPORTING}", re.I)
MACHINES = re.compile(r"\b(?:H100|H200|A100|V100|EPYC|Xeon|Ryzen)\b")


def _python_prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python file."""
    source = path.read_text()
    prose = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
             if tok.type == tokenize.COMMENT]
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                prose.append((body[0].lineno, body[0].value.value))
        # Attribute docstrings (a string after an assignment) and `#:` comments are prose too.
        for field in ("body", "orelse"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list):
                for before, stmt in zip(stmts, stmts[1:]):
                    if isinstance(before, (ast.Assign, ast.AnnAssign)) and isinstance(stmt, ast.Expr) \
                            and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                        prose.append((stmt.lineno, stmt.value.value))
    return prose


_C_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def _c_prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment of a C or C++ file, consecutive ``//`` lines joined."""
    source = path.read_text()
    prose: list[tuple[int, str]] = []
    last_line = -2
    for match in _C_COMMENT.finditer(source):
        line = source.count("\n", 0, match.start()) + 1
        text = match.group().lstrip("/").strip()
        if prose and line == last_line + 1 and match.group().startswith("//"):
            prose[-1] = (prose[-1][0], prose[-1][1] + " " + text)
        else:
            prose.append((line, text))
        last_line = line + match.group().count("\n")
    return prose


def _prose(path: Path) -> list[tuple[int, str]]:
    return _python_prose(path) if path.suffix == ".py" else _c_prose(path)


def _library_files() -> list[Path]:
    files = sorted(p for ext in ("py", "cc", "h", "cpp") for p in SRC.rglob(f"*.{ext}"))
    assert files, f"no library sources under {SRC}"
    return files


def _diary(text: str) -> list[str]:
    # Lines of a docstring or joined comments are one text: a phrase may break across lines.
    flat = re.sub(r"\s*\n\s*(?:#|//)?\s*", " ", text)
    return [m.group() for m in MEASURED.finditer(flat)]


@pytest.mark.parametrize("example", [
    'an H100 run measured JAX\'s "kernel" at 82 us a call where Nsight had measured 33 us',
    "in chunks it took 1.085x the time at 4x8x32x64x64",
    "the points layout takes 79 us against torch's 44 us in bilinear",
    "4x8x32x64x64 measured 67-85 ms a call over six runs",
    "the pool thread started on its share 45-190 us after it was scheduled, a call that took\n    0.7 ms",
])
def test_the_patterns_catch_the_diaries_this_repository_had(example):
    assert _diary(example), example


@pytest.mark.parametrize("prose", [
    "Seconds in the unit that reads best: ``412 µs``, ``3.27 ms``, ``1.5 s``.",
    "a 4x8x32x64x64 input takes a chunk of 64 points",
    "the harness runs each function ``number`` times and keeps the median",
])
def test_the_patterns_leave_contracts_alone(prose):
    assert not _diary(prose), prose


def test_no_measurement_diary_in_library_docstrings_or_comments():
    found = [f"{path.relative_to(ROOT)}:{line}: ...{phrase}..."
             for path in _library_files() for line, text in _prose(path) for phrase in _diary(text)]
    assert not found, ("measured figures in docstrings or comments (they belong in the results records, "
                       "their history in git):\n" + "\n".join(found))


def test_no_named_machine_outside_the_peak_tables():
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in _library_files() if path not in DATASHEETS
             for n, line in enumerate(path.read_text().splitlines(), 1) if MACHINES.search(line)]
    assert not found, ("a named machine outside the data-sheet tables (a run's device belongs in its "
                       "provenance):\n" + "\n".join(found))
    assert MACHINES.search(PEAK_TABLES.read_text()), "the peak tables name their GPUs: has lab/peaks.py moved?"
