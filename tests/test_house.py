"""The house rules of the library: a post declared once and named by one stem, rooms of a bounded size,
private names kept at home, and prose that cites only what the repository holds."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from conftest import ROOT

from sidebyside.publish import discovery, pipeline

SRC = ROOT / "src" / "sidebyside"
MAX_LINES = 600
NOTEBOOKS = discovery.discover(ROOT / "notebooks")


@pytest.mark.parametrize("info", NOTEBOOKS, ids=lambda i: i.slug)
def test_a_post_has_one_stem_for_its_notebook_package_and_tests(info):
    assert (SRC / "posts" / info.package / "__init__.py").is_file(), (
        f"{info.path.name}: its package is sidebyside.posts.{info.package} (the notebook's stem); create it")
    assert list((ROOT / "tests" / "posts" / info.package).glob("test_*.py")), (
        f"{info.path.name}: its tests live in tests/posts/{info.package}/")
    assert info.metrics, f"{info.path.name}: its header declares no metrics"


def test_every_post_package_has_its_notebook():
    packages = {p.parent.name for p in (SRC / "posts").glob("*/__init__.py")}
    assert packages == {i.package for i in NOTEBOOKS}, "a package under posts/ without a notebook, or the reverse"


def test_the_readme_table_of_posts_is_the_notebooks_headers():
    assert pipeline.write_readme(ROOT / "README.md", ROOT / "notebooks", check=True) == 0, "run: make readme"
    assert all(f"`{i.slug}`" in pipeline.posts_table() for i in NOTEBOOKS)


def test_the_readme_check_fails_on_a_table_edited_by_hand(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{pipeline.README_BEGIN}\n| a hand-made row |\n{pipeline.README_END}\nrest\n")
    assert pipeline.write_readme(readme, ROOT / "notebooks", check=True) == 1
    assert pipeline.write_readme(readme, ROOT / "notebooks") == 0
    text = readme.read_text()
    assert "hand-made" not in text and text.startswith("intro\n") and text.endswith("rest\n")
    assert pipeline.write_readme(readme, ROOT / "notebooks", check=True) == 0


def _modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_is_over_the_line_limit(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT)}: {lines} lines; split it by who uses it (at most {MAX_LINES})"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def private_crossings(path: Path, own: str) -> list[str]:
    """``"line: name"`` for each private name of another sidebyside module that ``path`` (the module
    ``own``) uses: imported (``from sidebyside.x import _y``) or read through an imported module (``x._y``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules: dict[str, str] = {}  # local alias -> sidebyside module
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sidebyside"):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__") and node.module != own:
                    found.append(f"{node.lineno}: {node.module}.{alias.name}")
                modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("sidebyside") and alias.asname:
                    modules[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            found.append(f"{node.lineno}: {modules[node.value.id]}.{node.attr}")
    return found


def test_no_private_name_is_used_outside_its_module():
    crossings = {str(p.relative_to(ROOT)): c for p in _modules() if (c := private_crossings(p, _module_name(p)))}
    assert not crossings, f"make these names public (no leading underscore) or keep them at home: {crossings}"


def test_the_private_name_check_sees_both_ways_of_reaching_in(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from sidebyside.lab import timing\nfrom sidebyside.lab.verdict import _split\n"
                     "timing._one_line(None)\ntiming.one_line(None)\n")
    found = private_crossings(probe, "sidebyside.probe")
    assert found == ["2: sidebyside.lab.verdict._split", "3: sidebyside.lab.timing._one_line"]


CITED = re.compile(r"\b([A-Z][A-Z_]+\.md)\b")


def test_prose_cites_only_files_the_repository_holds():
    files = [*SRC.rglob("*.py"), *(ROOT / "tests").rglob("*.py"), *(ROOT / "notebooks").glob("*.py"),
             ROOT / "Makefile", *(ROOT / "params").glob("*.yaml")]
    missing = sorted({f"{p.relative_to(ROOT)}: {name}" for p in files for name in CITED.findall(p.read_text())
                      if not (ROOT / name).is_file()})
    assert not missing, f"these cite a file outside the repository: {missing}"


def _users_of_lab_modules() -> dict[str, set[str]]:
    """Each ``lab`` module (or package) -> who imports it: ``lab``, ``run``, ``publish``, or ``post:<package>``
    (its notebook or its package)."""
    lab = SRC / "lab"
    names = sorted(p.stem for p in lab.glob("[!_]*.py")) + sorted(p.name for p in lab.iterdir()
                                                                  if (p / "__init__.py").is_file())
    users: dict[str, set[str]] = {name: set() for name in names}
    files = [*SRC.rglob("*.py"), *(ROOT / "notebooks").glob("*.py")]
    for path in files:
        parts = path.relative_to(ROOT).parts
        if parts[0] == "notebooks":
            who = "post:" + discovery.STEM_RE.match(path.stem).group(1)
        elif parts[2] == "posts" and len(parts) > 4:
            who = f"post:{parts[3]}"
        else:
            who = parts[2]
        text = path.read_text(encoding="utf-8")
        for name in names:
            inside = parts[:3] == ("src", "sidebyside", "lab") and (path.stem == name or name in parts[3:-1])
            pattern = rf"from sidebyside\.lab import [^\n]*\b{name}\b|sidebyside\.lab\.{name}\b"
            if not inside and re.search(pattern, text):
                users[name].add(who)
    return users


def test_lab_holds_only_what_more_than_one_post_uses():
    """A lab module that one post alone uses belongs in that post's package."""
    users = _users_of_lab_modules()
    single = {name: sorted(who) for name, who in users.items() if len(who) == 1 and next(iter(who)).startswith("post:")}
    assert not single, f"move these into the post's package (sidebyside.posts.<package>): {single}"
    assert not [name for name, who in users.items() if not who], "a lab module nobody imports"
