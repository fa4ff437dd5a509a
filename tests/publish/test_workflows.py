"""The GitHub workflows: actionlint where it is installed (make lint runs it),
CI's timeout against the time the README gives make test, and the gpu workflow's shape: one self-hosted GPU job per post the planner
names, each uploading its archive, one merge job that opens one pull request."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sidebyside.publish import schedule
from sidebyside.publish.cli import main
from sidebyside.publish.common import ROOT
from sidebyside.publish.discovery import discover

WORKFLOWS = ROOT / ".github" / "workflows"


def _actionlint() -> str | None:
    return shutil.which("actionlint", path=str(Path(sys.executable).parent)) or shutil.which("actionlint")


@pytest.mark.skipif(_actionlint() is None, reason="actionlint is not installed (pip install -r requirements-lint.txt)")
def test_actionlint_passes_every_workflow():
    done = subprocess.run([_actionlint(), *sorted(map(str, WORKFLOWS.glob("*.yml")))], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ci_allows_the_time_the_readme_says_make_test_takes():
    """The README states the range a fresh clone's `make test` takes; CI's timeout covers its slow end and is the
    figure the README gives for it."""
    ci = yaml.safe_load((WORKFLOWS / "ci.yml").read_text())
    timeout = ci["jobs"]["test"]["timeout-minutes"]
    readme = " ".join((ROOT / "README.md").read_text().split())
    said = re.search(r"`make test` takes (\d+) to (\d+) minutes from a fresh clone", readme)
    assert said, "README: say how long make test takes, as '`make test` takes A to B minutes from a fresh clone'"
    assert timeout >= int(said.group(2)), f"ci.yml allows {timeout} minutes, under the README's {said.group(2)}"
    assert f"allows {timeout}." in readme, f"README: say that CI allows {timeout} (minutes), as ci.yml does"


def _gpu_workflow():
    workflow = yaml.safe_load((WORKFLOWS / "gpu.yml").read_text())
    return workflow, workflow["jobs"]


def test_one_job_per_post_on_a_self_hosted_runner_of_the_chosen_gpu_kind():
    workflow, jobs = _gpu_workflow()
    kinds = workflow[True]["workflow_dispatch"]["inputs"]["gpu_kind"]["options"]  # YAML reads the key `on` as True
    labels = yaml.safe_load((ROOT / ".github" / "actionlint.yaml").read_text())["self-hosted-runner"]["labels"]
    assert set(kinds) <= set(labels) and "gpu" in labels
    run = jobs["run"]
    assert run["strategy"]["matrix"]["post"] == "${{ fromJSON(needs.plan.outputs.posts) }}"
    assert run["strategy"]["fail-fast"] is False  # one post failing does not stop the others
    assert run["runs-on"] == ["self-hosted", "linux", "gpu", "${{ inputs.gpu_kind }}"]
    steps = run["steps"]
    assert any("tools/device-run.sh" in step.get("run", "") for step in steps)
    upload = next(step for step in steps if str(step.get("uses", "")).startswith("actions/upload-artifact"))
    assert upload["with"]["name"] == "gpu-run-${{ matrix.post }}" and "gpu-run-" in upload["with"]["path"]
    for job in jobs.values():  # every job from the commit that was dispatched
        checkout = next(step for step in job["steps"] if str(step.get("uses", "")).startswith("actions/checkout"))
        assert checkout["with"]["ref"] == "${{ github.sha }}"


def test_the_last_job_merges_every_archive_and_opens_one_pull_request():
    _, jobs = _gpu_workflow()
    merge = jobs["merge"]
    assert set(merge["needs"]) == {"plan", "run"} and "always()" in merge["if"]
    download = next(step for step in merge["steps"] if str(step.get("uses", "")).startswith("actions/download-artifact"))
    assert download["with"]["pattern"] == "gpu-run-*" and download["with"]["merge-multiple"] is True
    script = "\n".join(step.get("run", "") for step in merge["steps"])
    assert "python -m sidebyside.publish merge" in script and "--expect" in script
    assert script.count("gh pr create") == 1
    assert merge["permissions"] == {"contents": "write", "pull-requests": "write"}


def test_the_plan_job_names_the_gpu_posts(capsys):
    """What the matrix receives: `plan --posts --all` lists the notebooks with a budget line, as JSON."""
    _, jobs = _gpu_workflow()
    assert any("sidebyside.publish plan --posts" in step.get("run", "") for step in jobs["plan"]["steps"])
    assert main(["plan", "--posts", "--all"]) == 0
    posts = json.loads(capsys.readouterr().out)
    budgets = schedule.read_budgets(ROOT / "notebooks", ROOT / "params")
    gpu_posts = [i.slug for i in discover(ROOT / "notebooks") if i.slug in budgets["posts"]]
    first = [s for s in budgets.get("order") or [] if s in gpu_posts]
    assert posts == first + [s for s in gpu_posts if s not in first], "the budget's order first, then the notebooks'"
    assert "weight-visualisation" not in posts and "grid-sample-parity" in posts
