"""What the pages say about each result (sidebyside.publish.frontpage, .anomalies) and the lint of a
post's generated text (sidebyside.publish.lint), from records alone. The browser checks of the same
are in test_front_page_browser.py."""

from __future__ import annotations

import copy
import json
import re

import nbformat
import pytest
import yaml
from conftest import ROOT
from test_pairs import fixture_info, fixture_notebook, fixture_record

from sidebyside import publish
from sidebyside.publish import anomalies, frontpage, lint, schedule
from sidebyside.publish.common import PublishError

PROVENANCE = {"device": "NVIDIA H100 80GB HBM3", "device_kind": "gpu", "cpu": "Intel Xeon (16 cores)",
              "git_sha": "abc123", "threads": {"torch_num_threads": 16, "OMP_NUM_THREADS": "16",
                                               "blas": [{"library": "openblas", "num_threads": 16}]}}


def speed(question="Which framework is faster on the GPU?", *, winner="torch", subject="torch", ratio=0.811,
          interval=(0.772, 0.82), factor=1.233, label="faster"):
    return {"question": question, "label": label, "winner": winner, "subject": subject,
            "other": "jax" if subject == "torch" else "torch", "ratio": ratio, "interval": list(interval),
            "factor": factor, "sentence": "", "test": "ratio of medians (subject's time over the other's)"}


def seeds(label="lower", winner="torch", difference=-0.169):
    return {"question": "Are Flax's templates rougher?", "label": label, "winner": winner, "subject": "torch",
            "other": "jax", "difference": difference, "test": "difference of means against two Welch standard errors",
            "sentence": "PyTorch reaches a lower normalised total variation of the final templates: 0.794 against "
                        "0.963 for JAX over 5 seeds."}


def record(verdicts, *, slug="post", executed_at="2026-11-23T04:00:00+00:00", profile="gpu", metrics=None):
    return {"slug": slug, "profile": profile, "executed_at": executed_at, "provenance": copy.deepcopy(PROVENANCE),
            "metrics": {"verdicts": verdicts, **(metrics or {})}}


ENTRY = {"date": "2026-11-24T21:35:24+00:00", "day": "2026-11-24", "title": "K-step against lax.scan",
         "changed": "like against like", "commit": "dbcbb51", "kinds": ["speed"], "posts": [], "supersedes": True}
LATER = {**ENTRY, "date": "2026-11-25T21:00:00+00:00", "day": "2026-11-25", "title": "Pooled processes",
         "supersedes": False}


# --------------------------------------------------------------------------- one notation


def test_a_speed_verdict_reads_in_the_winners_terms_with_its_interval_the_same_way():
    # subject wins: the stored interval (subject's time over the other's, < 1) turns round
    assert frontpage.answer(speed()) == ("PyTorch 1.23× faster", "1.22–1.30×")
    # the other side wins: the stored interval already runs the winner's way
    assert frontpage.answer(speed(winner="jax", ratio=3.75, interval=(3.71, 3.805), factor=3.75, label="slower")) \
        == ("JAX 3.75× faster", "3.71–3.81×")
    # a record from before `factor`: its ratio was the winner's speed-up
    old = speed(ratio=1.2334621800440693, factor=None)
    del old["factor"]
    assert frontpage.answer(old) == ("PyTorch 1.23× faster", "1.22–1.30×")
    # a tie in its own kind's words: "practically tied" is a speed interval inside the noise floor, nothing else
    for label, said in (("within noise", "no clear winner (within noise)"), ("practically tied", "practically tied"),
                        ("tie", "tied"), ("within seed noise", "within seed noise")):
        assert frontpage.answer({**speed(), "label": label, "winner": None})[0] == said


def test_comparative_words_say_what_they_compare():
    text, interval = frontpage.answer(seeds())
    assert text == "PyTorch: lower normalised total variation of the final templates, by 0.169" and not interval
    fewer = {"question": "Which framework needs less code for fully sharded?", "label": "fewer", "winner": "torch",
             "subject": "torch", "other": "jax", "test": "exact count; a difference under 1% is a tie",
             "sentence": "PyTorch (FSDP2) needs fewer lines of code than JAX (jit) for fully sharded: 4 against 6 lines."}
    assert frontpage.answer(fewer)[0] == "PyTorch needs fewer lines of code" and frontpage.kind_of(fewer) == "code"


def _gpu_sections() -> set[str]:
    return schedule.gpu_sections(publish.discover(ROOT / "notebooks"))


def test_a_post_owes_a_gpu_run_only_where_its_header_plans_a_gpu_section():
    """weight-visualisation has no GPU section and parallel-training's header plans none (gpu.not_planned): the
    board owes neither a GPU run; every post whose header plans one and has no standing GPU run owes it."""
    sections = _gpu_sections()
    assert "weight-visualisation" not in sections and "parallel-training" not in sections
    assert {"real-models", "swin-transformer-v2", "grid-sample-parity"} <= sections
    board = frontpage.board(ROOT, {}, sections, ROOT)
    for slug, post in board["posts"].items():
        roles = [r["role"] for r in post["runs"]]
        assert ("gpu" in roles) == (slug in sections or post["runs"][-1]["present"] and roles[-1] == "gpu"), slug


def test_every_published_answer_uses_the_notation():
    """The site's own records: no "ahead", every won speed verdict "X n× faster (a–b×)", a < b, the
    factor inside its interval."""
    states = json.loads((ROOT / "_data" / "freshness.json").read_text())
    board = frontpage.board(ROOT, states, _gpu_sections(), ROOT)
    for slug, post in board["posts"].items():
        for v in post["verdicts"]:
            assert "ahead" not in v["answer"], (slug, v)
            if v["kind"] == "speed" and v["answer"].endswith("faster"):
                factor = float(re.fullmatch(r"(PyTorch|JAX) ([\d.]+)× faster", v["answer"]).group(2))
                lo, hi = (float(x) for x in re.fullmatch(r"([\d.]+)–([\d.]+)×", v["interval"]).groups())
                assert lo <= factor <= hi, (slug, v)


def test_the_device_is_the_one_each_verdict_ran_on():
    post = frontpage.post_view(record([speed(), speed("Which is faster on the CPU?")]), [], "current", False)
    assert [(v["device"], v["device_kind"]) for v in post["verdicts"]] == [
        ("NVIDIA H100 80GB HBM3", "gpu"), ("Intel Xeon (16 cores)", "cpu")]


# --------------------------------------------------------------------------- stale and superseded


def test_a_withdrawn_method_supersedes_the_whole_run_which_shows_no_figure():
    rec = record([speed(), seeds(label="within seed noise", winner=None)])  # a GPU run older than ENTRY
    post = frontpage.post_view(rec, [ENTRY, LATER], "current", True)
    cpu, gpu = post["runs"]
    assert cpu["owed"] and not cpu["present"] and gpu["present"]
    assert gpu["superseded"] and gpu["owed"] and gpu["superseded_by"] == ENTRY["title"]
    # every verdict of the run, whatever its kind: the page cannot show the rest of a withdrawn run
    assert [(v["superseded"], v["answer"], v["interval"]) for v in gpu["verdicts"]] == [
        (True, "superseded: re-run owed", "")] * 2
    assert post["verdicts"] == [] and post["home"] == [] and "×" not in post["answer"]
    assert post["states"] == ["superseded", "CPU run owed", "GPU run owed"]
    # a run after the correction stands; it is stale only for the later entry
    later = frontpage.post_view(record([speed()], executed_at="2026-11-25T02:00:00+00:00"), [ENTRY, LATER],
                                "current", True)
    assert not later["runs"][1]["superseded"] and [e["title"] for e in later["since"]] == ["Pooled processes"]
    assert later["states"] == ["stale", "CPU run owed"] and later["answer"] == "PyTorch 1.23× faster"
    fresh = frontpage.post_view(record([speed()], executed_at="2026-11-26T00:00:00+00:00"), [ENTRY, LATER],
                                "current", False)
    assert fresh["states"] == ["CPU run owed"] and not fresh["since"]
    both = frontpage.post_view({**record([seeds()], profile="cpu", executed_at="2026-11-26T00:00:00+00:00"),
                                "gpu_run": rec}, [ENTRY, LATER], "current", True)
    assert [(r["role"], r["owed"], r["at"]) for r in both["runs"]] == [("cpu", False, ""), ("gpu", True, "gpu_run")]
    assert both["states"] == ["superseded", "GPU run owed"] and [v["kind"] for v in both["verdicts"]] == ["accuracy"]


def test_an_entry_names_its_posts():
    other = {**ENTRY, "posts": ["another-post"]}
    assert not frontpage.post_view(record([speed()]), [other], "current", False)["verdicts"][0]["superseded"]


def test_the_changelog_is_data_with_the_past_changes_and_todays(tmp_path):
    entries = frontpage.load_changelog(tmp_path, ROOT)
    titles = [e["title"] for e in entries]
    assert any("lax.scan" in t for t in titles) and any("repetitions" in t for t in titles)
    today = next(e for e in entries if e["day"] == "2026-11-25")
    assert "processes" in today["title"] and "noise floor" in today["changed"] and today["supersedes"]
    fashion = next(e for e in entries if "lax.scan" in e["title"])
    assert fashion["supersedes"] and fashion["posts"] == ["fashion-mnist-pytorch-vs-flax"]
    (tmp_path / "_data").mkdir()
    (tmp_path / "_data" / "method_changelog.yml").write_text(yaml.safe_dump([{"date": "2026-01-01", "title": "t",
                                                                              "changed": "c", "kinds": ["speeed"]}]))
    with pytest.raises(PublishError, match="unknown kinds.*speeed"):
        frontpage.load_changelog(tmp_path, ROOT)


def test_no_published_run_of_a_withdrawn_method_shows_a_figure():
    board = frontpage.board(ROOT, json.loads((ROOT / "_data" / "freshness.json").read_text()), _gpu_sections(), ROOT)
    pooled = next(e for e in board["changelog"] if "pool" in e["title"])
    seen = 0
    for slug, post in board["posts"].items():
        for run in post["runs"]:
            if run["present"] and run["executed_at"] < pooled["date"]:
                seen += 1
                assert run["superseded"] and run["owed"] and run["answer"] == "", (slug, run["role"])
                assert all("×" not in v["answer"] for v in run["verdicts"]), slug
        assert all(not v["superseded"] for v in post["home"]) and (post["answer"] == "" or "superseded" not in
                                                                   post["answer"]), slug
    assert seen or all(p["runs"][0]["present"] for p in board["posts"].values())


# --------------------------------------------------------------------------- bounded


def test_at_most_five_verdicts_on_the_home_page_and_fifty_a_record():
    post = frontpage.post_view(record([speed(f"q{i}?") for i in range(12)]), [], "current", False)
    assert len(post["home"]) == frontpage.HOME_VERDICTS and post["more"] == 7
    with pytest.raises(PublishError, match=r"_data/results/big\.json holds 51 verdicts, more than the 50"):
        frontpage.post_view(record([speed()] * 51, slug="big"), [], "current", False)


# --------------------------------------------------------------------------- anomalies


def test_anomalies_are_flagged_with_what_the_run_measured():
    ladder = {"torch/eager": {"median_s": 1.0, "q1_s": 0.95, "q3_s": 1.05},
              "torch/compile": {"median_s": 1.3, "q1_s": 1.2, "q3_s": 1.4},
              "torch/compile-explained": {"median_s": 1.3, "q1_s": 1.2, "q3_s": 1.4, "graph_breaks": 3}}
    metrics = {"ladder": ladder, "peak_flops": {"cpu/float32": {"flops": 2.0e12}},
               "matmul": {"cpu/float32/2048": {"ladder": {"torch/eager": {"median_s": 0.0518},
                                                          "jax/jit": {"median_s": 0.0218}}}}}
    verdicts = [speed("Which evaluates f faster on the CPU?", ratio=0.054, interval=(0.051, 0.064), factor=18.4),
                speed("Which computes a 2048×2048 matmul in float32 faster on the CPU?"), speed()]
    suspects, notes = anomalies.find(record(verdicts, metrics=metrics))
    assert "above 10×" in suspects[0] and "(the notebook's process ran with PyTorch 16 threads; BLAS openblas (16 threads)" \
        in suspects[0]
    assert "below 20% of the device's peak (PyTorch 16.6%)" in suspects[1] and "JAX" not in suspects[1]
    assert 2 not in suspects
    assert len(notes) == 1 and "PyTorch's compile rung is slower than its eager rung" in notes[0]
    post = frontpage.post_view(record(verdicts, metrics=metrics), [], "current", False)
    assert post["verdicts"][0]["suspect"] == suspects[0] and post["suspects"] == notes
    # a verdict that carries its measured cause is not suspect
    verdicts[0]["cause"] = "PyTorch's best (compile) kept 2 cores busy per call and JAX's best (jit) 1"
    assert 0 not in anomalies.find(record(verdicts, metrics=metrics))[0]


# --------------------------------------------------------------------------- lint

CLEAN = "---\ntitle: t\n---\n\n## 1. One\n\nText with a list:\n\n- item\n\n## 2. Two\n\n## Appendix {#appendix}\n\n## 1. Moved\n"


@pytest.mark.parametrize("text, said", [
    ("```text\nW1123 04:20:16.519000 9571 torch/_logging/_internal.py:1279] Profiler record function\n```",
     "line 6: a glog/absl log line"),
    ("```\n[venv]/lib/torch/_inductor/compile_fx.py:322: UserWarning: TensorFloat32 tensor cores\n```",
     "line 6: a Python warning"),
    ("WARNING:absl:something happened", "line 5: a Python logging line"),
    ("```\nsteps    30\ndtype: float64\n```", "line 7: a pandas Series' dtype line"),
    ("The details, all taken from PyTorch's ATen kernels:\n\n## 2. Next", "line 5: a sentence ends in a colon"),
    ("## 1. One\n\n## 4. Four", "line 7: section 4 where section 2 was due"),
])
def test_the_lint_refuses_each_case_naming_its_line(text, said):
    post = f"---\ntitle: t\n---\n\n{text}\n"
    with pytest.raises(PublishError, match=re.escape(said)):
        lint.check(post, "notebooks/x.py")
    assert lint.problems(CLEAN) == []


def test_render_refuses_a_post_whose_outputs_hold_a_library_warning(tmp_path):
    nb = fixture_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("x = 1", outputs=[nbformat.v4.new_output(
        "stream", name="stderr", text="W1123 04:19:28.977502    9668 cuda_timer.cc:88] Delay kernel timed out\n")]))
    with pytest.raises(PublishError, match=r"line \d+: a glog/absl log line in the post: W1123"):
        publish.render(nb, fixture_record(), fixture_info(tmp_path), {"repository": "owner/name", "branch": "main"})


def test_the_post_is_dated_by_its_run(tmp_path):
    rec = fixture_record()
    post, _ = publish.render(fixture_notebook(), rec, fixture_info(tmp_path), {"repository": "o/n", "branch": "main"})
    assert yaml.safe_load(post.split("---\n")[1])["date"] == rec["executed_at"][:10]


def test_the_stale_banner_names_only_the_kinds_of_figures_the_post_shows():
    both = {**LATER, "kinds": ["accuracy", "speed"]}
    assert frontpage.post_view(record([speed()]), [both], "current", False)["since_kinds"] == ["speed"]
    assert frontpage.post_view(record([seeds()]), [{**LATER, "kinds": ["speed"]}], "current", False)["since_kinds"] == []
