"""The notebooks narrate; the library decides (issue 17).

Every notebook keeps its hidden code to plumbing (installing on Colab, saving results): under
30 lines of code in cells the post does not show. Each has lower-case parameters, a Conclusion,
and names that mean one thing across notebooks. These tests read the jupytext sources, so they
run in a fraction of a second and fail the moment a notebook grows a hidden essay again.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.py"))
HIDDEN_TAGS = {"remove_input", "remove_cell"}
HIDDEN_BUDGET = 30  # lines of code (not blank, not comments) in hidden cells, the Colab install included

_CELL = re.compile(r"^# %%(?P<kind> \[markdown\])?(?P<rest>.*)$")


def cells(path: Path) -> list[dict]:
    """The cells of a jupytext percent notebook: kind, tags and source lines."""
    out: list[dict] = []
    for line in path.read_text().splitlines():
        m = _CELL.match(line)
        if m:
            tags = set(re.findall(r'"([^"]+)"', m["rest"].split("tags=", 1)[1])) if "tags=" in m["rest"] else set()
            out.append({"kind": "markdown" if m["kind"] else "code", "tags": tags, "lines": []})
        elif out:
            out[-1]["lines"].append(line)
    return out


def code_lines(lines: list[str]) -> int:
    return sum(1 for line in lines if line.strip() and not line.strip().startswith("#"))


def test_the_notebooks_are_found():
    assert len(NOTEBOOKS) >= 6


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_hidden_code_is_only_plumbing(path):
    hidden = {i: code_lines(c["lines"]) for i, c in enumerate(cells(path))
              if c["kind"] == "code" and c["tags"] & HIDDEN_TAGS}
    total = sum(hidden.values())
    assert total < HIDDEN_BUDGET, (
        f"{path.name} hides {total} lines of code (cells {hidden}); the budget is under {HIDDEN_BUDGET}. "
        "Move the deciding and the wording into a tested library function and call it.")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_are_lower_case(path):
    params = [c for c in cells(path) if "parameters" in c["tags"]]
    assert len(params) == 1, f"{path.name} needs exactly one cell tagged parameters"
    names = [t.id for node in ast.parse("\n".join(params[0]["lines"])).body if isinstance(node, ast.Assign)
             for t in node.targets if isinstance(t, ast.Name)]
    assert names and all(n == n.lower() for n in names), f"{path.name}: upper-case parameters {names}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_has_a_conclusion(path):
    text = path.read_text()
    assert re.search(r"^#+ .*Conclusion", text, re.M) or re.search(r"## (\d+\. )?Conclusion", text), (
        f"{path.name} has no Conclusion section")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_alias_means_two_things(path):
    """`F` is torch.nn.functional wherever it appears; sidebyside modules go by their own names."""
    for node in ast.walk(ast.parse(_code(path))):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.asname == "F":
                    full = f"{getattr(node, 'module', '') or ''}.{alias.name}".strip(".")
                    assert full == "torch.nn.functional", f"{path.name}: F means {full}"


def _code(path: Path) -> str:
    return "\n".join("\n".join(c["lines"]) for c in cells(path) if c["kind"] == "code"
                     and not any(line.lstrip().startswith(("!", "%")) for line in c["lines"]))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_post_pairs_at_least_two_pieces_of_framework_code(path):
    pairs = {tag.split(":")[1] for c in cells(path) for tag in c["tags"] if tag.startswith("pair:")}
    assert len(pairs) >= 2, f"{path.name} pairs {sorted(pairs)}: show at least two pieces of PyTorch and JAX code side by side"


# A compile cache switched off on one side alone makes that side compile cold in every process while
# the other reuses its work (conditions.same_conditions gives both one cache folder per run).
CACHE_SWITCHES = re.compile(r"force_disable_caches|fx_graph_cache\s*=\s*False|autograd_cache\s*=\s*False|"
                            r"jax_compilation_cache_dir[\"']\s*,\s*None|jax_enable_compilation_cache[\"']\s*,\s*False|"
                            r"TORCHINDUCTOR_FORCE_DISABLE_CACHES|JAX_ENABLE_COMPILATION_CACHE")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_notebook_switches_a_compile_cache_off(path):
    found = [f"line {n}: {line.strip()}" for n, line in enumerate(path.read_text().splitlines(), 1)
             if CACHE_SWITCHES.search(line)]
    assert not found, f"{path.name} switches a framework's compilation cache off: {found}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_numbered_sections_run_one_by_one(path):
    numbers = [int(m[1]) for m in re.finditer(r"^# ## (\d+)\. ", path.read_text(), re.M)]
    assert numbers == list(range(1, len(numbers) + 1)), f"{path.name}: its sections are numbered {numbers}"


MAX_CELL_LINES = 80  # a cell longer than this is split where the code divides (a reader reads a screen at a time)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_cell_is_over_80_lines(path):
    long = {i: n for i, c in enumerate(cells(path)) if (n := len("\n".join(c["lines"]).rstrip().splitlines()))
            > MAX_CELL_LINES}
    assert not long, (f"{path.name}: cells over {MAX_CELL_LINES} lines ({{cell: lines}}: {long}); split each where "
                      "its code divides (a pair into two pairs, each side's own code in each)")


def _setup_calls(tree: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "setup" and isinstance(n.func.value, ast.Name) and n.func.value.id == "notebook"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_sets_up_with_the_one_helper_before_any_framework(path):
    """One call of ``sidebyside.lab.notebook.setup`` (conditions, log filters, devices, provenance, warm
    start), in a cell where ``notebook`` is that module, and no cell before it imports PyTorch or JAX."""
    code = [c for c in cells(path) if c["kind"] == "code"]
    trees = [ast.parse("\n".join(c["lines"])) for c in code]
    where = [i for i, tree in enumerate(trees) for _ in _setup_calls(tree)]
    assert len(where) == 1, f"{path.name} calls notebook.setup {len(where)} times; call it once, in its set-up cell"
    imported = [n for n in ast.walk(trees[where[0]]) if isinstance(n, ast.ImportFrom) and n.module == "sidebyside.lab"
                and any(a.name == "notebook" and a.asname is None for a in n.names)]
    assert imported, f"{path.name}: its set-up cell must import the helper: from sidebyside.lab import notebook"
    early = sorted({alias.name for tree in trees[:where[0]] for n in ast.walk(tree)
                    if isinstance(n, (ast.Import, ast.ImportFrom))
                    for alias in (n.names if isinstance(n, ast.Import) else [ast.alias(n.module or "")])
                    if alias.name.split(".")[0] in ("jax", "torch", "flax")})
    assert not early, f"{path.name} imports {early} before notebook.setup, which must run before JAX starts"
