"""What a reader reads of a post, measured (sidebyside.publish.wordcount: prose before the appendix,
the conclusion, sentences said three times), what the publisher does with it (the lint's
check_reading, ``publish words``), and the home page's card (the scale raced, the unsettled mark,
the hardware line), on small fixtures: never on today's posts, which change."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import nbformat
import pytest
from conftest import make_site
from test_pairs import fixture_info, fixture_notebook, fixture_record

from sidebyside import publish
from sidebyside.lab import framing, verdict
from sidebyside.publish import cli, frontpage, lint, reruns, wordcount
from sidebyside.publish.common import PublishError

FRONT = "---\nlayout: post\ntitle: Front matter words never count\nslug: fixture\n---\n\n"

#: The words that count: 6 of the compared paragraph, 12 of the next (inline code and math as
#: their text), 2 of the output, 4 collapsed, 4 + 3 of the conclusion: 31 before the appendix.
POST = FRONT + """\
<div class="compared" markdown="0"><p><strong>What was compared.</strong> \
Two small things.</p></div>

[![An alt text of seven words here](../../images/x/f.png)](../../images/x/f.png)

One paragraph with `inline code` and $$x = 3$$ and a [link text](https://example.org).

```python
print("code words never count in any fence")
```

| a table | of words |
|---------|----------|
| never   | counted  |

<div class="output-html" markdown="0"><div><table><tr><td>cell words</td></tr></table>\
<p>Two words.</p></div></div>

<div class="pair" data-pair="f" markdown="0"><div class="pair-head torch">PyTorch</div>\
<pre><code>x = 1</code></pre></div>

<details class="collapsed" markdown="1"><summary>A label never counted</summary>

Collapsed prose counts too.

</details>

## 2. Conclusion

Short conclusion here now.

<details class="collapsed" markdown="1"><summary>The conclusion in full</summary>

<div class="output-markdown" markdown="0">
<p>Three more words.</p>
</div>

</details>

## Appendix {#appendix}

Appendix words never count toward the prose.
"""


def test_prose_counts_what_a_reader_reads_before_the_appendix_and_nothing_generated_or_coded():
    reading = wordcount.measure(POST)
    assert (reading.prose, reading.conclusion, reading.repeated) == (31, 7, {})
    # the appendix and the front matter do not move the count; prose before the appendix does
    assert wordcount.measure(POST + "\nMany more appendix words here.\n").prose == 31
    longer = POST.replace("Two small things.", "Two small things, and three more.")
    assert wordcount.measure(longer).prose == 34


def test_the_conclusion_runs_to_the_next_heading_of_its_level():
    post = FRONT + ("Intro words.\n\n## 3. Conclusions {#end}\n\nA b c d.\n\n"
                    "### 3.1 Detail\n\nE f.\n\n## 4. Next\n\nG h i.\n")
    reading = wordcount.measure(post)
    assert (reading.conclusion, reading.prose) == (6, 11)
    assert wordcount.measure(FRONT + "## 1. In conclusion, not one\n\nWords.\n").conclusion is None


def test_a_sentence_said_three_times_numbers_aside_is_found_wherever_the_page_says_it():
    said = "The caveat holds at {} steps, on 2 cores."
    post = FRONT + (f"{said.format(12)} Another sentence follows it here.\n\n"
                    f"- {said.format(40)}\n\nSee below. See below. See below.\n\n"
                    f"```text\n{said.format(1)}\n```\n\n## Appendix {{#appendix}}\n\n")
    found = {"the caveat holds at # steps, on # cores": 3}
    assert wordcount.measure(post).repeated == {}  # twice; code and short labels never count
    assert wordcount.measure(post + said.format(7) + "\n").repeated == found
    # the verdict box's texts count too, from the results record
    record = {"profile": "cpu", "metrics": {"verdicts": [
        {"question": "Which is faster?", "caveat": said.format(3), "test": "exact count"},
        {"question": "Which is faster?", "caveat": "", "test": "exact count"}]}}
    assert wordcount.measure(post, record).repeated == found
    assert wordcount.sentences("It is 1.5× faster, e.g. here. Then it stops!") == [
        "It is 1.5× faster, e.g. here.", "Then it stops!"]
    assert wordcount.normalise("  PyTorch is 1.23× faster than 10,000   calls. ") == (
        "pytorch is #× faster than # calls")


def test_over_names_each_limit_passed():
    assert wordcount.over(wordcount.Reading(prose=1500, conclusion=400)) == []
    assert wordcount.over(wordcount.Reading(prose=1501, conclusion=401)) == [
        "prose before the appendix 1,501 words, over 1,500", "conclusion 401 words, over 400"]


ECHO = "This caveat is said too often on one page.\n\n"
LONG = FRONT + "word " * 1600 + "\n\n## 2. Conclusion\n\n" + "said " * 450 + "\n"
REPEATS = FRONT + ECHO * 3


def test_the_render_step_warns_and_refuses_repeats_only_when_strict(monkeypatch, capsys):
    monkeypatch.delenv(lint.STRICT_WORDS, raising=False)
    lint.check_reading(LONG, "notebooks/x.py")
    said = capsys.readouterr().err
    assert "notebooks/x.py: prose before the appendix 2,050 words, over 1,500" in said
    assert "conclusion 450 words, over 400" in said
    lint.check_reading(REPEATS, "notebooks/x.py")
    assert "3×: this caveat is said too often on one page" in capsys.readouterr().err
    monkeypatch.setenv(lint.STRICT_WORDS, "1")
    lint.check_reading(LONG, "notebooks/x.py")  # length alone still warns
    with pytest.raises(PublishError, match="1 sentence said 3 times or more"):
        lint.check_reading(REPEATS, "notebooks/x.py")


def test_render_checks_the_post_it_renders(tmp_path, monkeypatch):
    nb = fixture_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell(ECHO * 3))
    config = {"repository": "owner/name", "branch": "main"}
    monkeypatch.setenv(lint.STRICT_WORDS, "1")
    with pytest.raises(PublishError, match="this caveat is said too often on one page"):
        publish.render(nb, fixture_record(), fixture_info(tmp_path), config)


def test_publish_words_prints_each_post_against_the_limits(tmp_path, capsys):
    (tmp_path / "_posts").mkdir()
    (tmp_path / "_posts" / "2026-01-01-short.md").write_text(FRONT + "Four words in all.\n")
    (tmp_path / "_posts" / "2026-01-02-long.md").write_text(LONG)
    (tmp_path / "_posts" / "2026-01-03-echo.md").write_text(REPEATS)
    assert cli.main(["words", "--site", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split() for line in lines[1:4]}
    assert rows["short"] == ["short", "4", "none", "0", "-"]
    assert rows["long"] == ["long", "2,050", "450", "0", "prose,", "conclusion"]
    assert rows["echo"][-1] == "repeats"
    assert "    3×  this caveat is said too often on one page" in lines
    assert cli.main(["words", "--site", str(tmp_path), "--only", "short"]) == 0


# --------------------------------------------------------------------------- the home page's card

SLUG = "card-fixture"
SCALE = framing.scale_of(parameters=25_557_032, input="224²×3", batch=1, precision="float32",
                         device="CPU")
GPU_SCALE = framing.scale_of(parameters=25_557_032, input="224²×3", batch=256,
                             precision="float32", device="NVIDIA H200")


def _speed(question, torch_s, jax_s, scale=SCALE):
    t = {"median_s": torch_s, "processes_s": [torch_s * (1 + f) for f in (-0.02, 0, 0.02)]}
    j = {"median_s": jax_s, "processes_s": [jax_s * (1 + f) for f in (0, 0.02, -0.02)]}
    return verdict.speed(t, j, question=question, subject_tool="eager", other_tool="jit",
                         scale=scale).to_dict()


def _card_record(headline=(1.0, 1.5)):
    gpu = {"profile": "gpu", "executed_at": "2026-11-25T00:00:00+00:00", "source_hash": "g",
           "provenance": {"device": "NVIDIA H200", "device_kind": "gpu", "git_sha": "def456"},
           "metrics": {"verdicts": [_speed("Which is faster on the GPU?", 2.0, 1.0, GPU_SCALE)]}}
    return {"slug": SLUG, "profile": "cpu", "executed_at": "2026-11-24T00:00:00+00:00",
            "source_hash": "k",
            "provenance": {"device": "Intel(R) Xeon(R) Processor (1 core)", "device_kind": "cpu",
                           "git_sha": "abc123"},
            "metrics": {"verdicts": [_speed("Which trains faster?", *headline)]}, "gpu_run": gpu}


def _unsettle(site, record):
    """A log of re-runs in which the headline's winner turned (PyTorch published, JAX again)."""
    again = {**record, "metrics": {"verdicts": [_speed("Which trains faster?", 1.5, 1.0)]}}
    entry = reruns._entry(again)
    reruns.path(site, SLUG).parent.mkdir(parents=True, exist_ok=True)
    log = {"slug": SLUG, "source_hash": "k", "runs": [entry]}
    reruns.path(site, SLUG).write_text(json.dumps(log))


def test_the_card_fields_hold_the_headlines_scale_and_its_unsettled_mark(tmp_path):
    record = _card_record()
    settled = frontpage.post_view(record, [], "current", True)
    # the scale as the record gives it, less a device the card's hardware line names in full
    assert SCALE["text"] == "25.6M parameters, input 224²×3, batch 1, float32, on CPU"
    assert settled["scale"] == "25.6M parameters, input 224²×3, batch 1, float32"
    assert settled["runs"][1]["scale"] == "25.6M parameters, input 224²×3, batch 256, float32"
    assert settled["unsettled"] is False
    assert settled["verdicts"][0]["scale"] == SCALE["text"]  # the verdict's own, whole
    _unsettle(tmp_path, record)
    shown = frontpage.post_view(record, [], "current", True, site=tmp_path)
    assert shown["unsettled"] is True and shown["runs"][0]["unsettled"] is True
    assert shown["runs"][1]["unsettled"] is False  # the GPU run has no log of re-runs


def test_a_card_keeps_a_device_that_says_more_than_the_hardware_line():
    simulated = framing.scale_of(parameters=940_330, input="28×28", batch=64,
                                 device="8 simulated CPU devices (Xeon (2 cores))")
    assert frontpage.card_scale(simulated, "Xeon (2 cores)") == simulated["text"]
    bare = framing.scale_of(input="2048×2048", device="CPU")
    assert frontpage.card_scale(bare, "Xeon") == "input 2048×2048"
    assert frontpage.card_scale(framing.scale_of(batch=8, device="Xeon"), "Xeon") == "batch 8"
    assert frontpage.card_scale(None, "Xeon") == ""


class _Cards(HTMLParser):
    """The text of each ``li.card`` of a page, one string per card."""

    def __init__(self):
        super().__init__()
        self.cards, self.depth = [], 0

    def handle_starttag(self, tag, attrs):
        if tag == "li" and "card" in (dict(attrs).get("class") or "").split():
            self.cards.append("")
            self.depth = 1
        elif tag == "li" and self.depth:
            self.depth += 1

    def handle_endtag(self, tag):
        if tag == "li" and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if self.depth:
            self.cards[-1] += data


@pytest.mark.slow  # a Jekyll build
def test_the_home_page_card_states_the_scale_the_hardware_and_the_unsettled_mark(tmp_path):
    from test_site import _jekyll

    site = make_site(tmp_path / "site")
    record = _card_record()
    (site / "_data" / "results").mkdir(parents=True)
    (site / "_data" / "results" / f"{SLUG}.json").write_text(json.dumps(record))
    (site / "_posts").mkdir()
    (site / "_posts" / f"2026-11-24-{SLUG}.md").write_text(
        f"---\nlayout: post\ntitle: Card fixture\nslug: {SLUG}\ndate: 2026-11-24\n---\nbody\n")
    _unsettle(site, record)
    frontpage.write_board(site, {SLUG: "current"}, {SLUG}, root=site)  # no changelog
    cards = _Cards()
    cards.feed((_jekyll(site) / "index.html").read_text())
    (card,) = [" ".join(c.split()) for c in cards.cards]
    assert "PyTorch 1.50× faster" in card and "unsettled between runs" in card
    # each run under its hardware line (not "CPU"), with the scale its headline raced
    assert ("CPU run: Intel(R) Xeon(R) Processor (1 core) · Nov 24, 2026 · 25.6M parameters, "
            "input 224²×3, batch 1, float32") in card
    assert ("GPU run: NVIDIA H200 · Nov 25, 2026 · 25.6M parameters, input 224²×3, batch 256, "
            "float32 · JAX 2.00× faster") in card
    assert card.count("unsettled between runs") == 1 and "on CPU" not in card
