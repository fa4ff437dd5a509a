"""The progress bars a post shows: none over nothing."""

from __future__ import annotations

from sidebyside.lab import progress


def test_no_bar_over_an_empty_iterable_and_one_over_the_rest(monkeypatch, capsys):
    monkeypatch.setattr(progress, "headless", lambda: True)
    assert list(progress.bar([], desc="GPUs")) == []
    assert capsys.readouterr().out == ""
    assert list(progress.bar([1, 2], desc="GPUs")) == [1, 2]
    assert "GPUs" in capsys.readouterr().out
