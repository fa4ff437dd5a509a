"""No value of a secret of the publisher's environment reaches a published file, in any simple form.

The class: a token, key or password of the environment the publisher runs in (``*_TOKEN``,
``*_SECRET``, ``*_KEY``, ...) written into the post, its record, its downloads or its figures,
as it is or reversed, base64-encoded (at any alignment inside longer base64), hex, URL-encoded or
escaped. :mod:`sidebyside.publish.secrets` refuses the post naming the file and the variable,
never the value, and nothing already published changes. Every value here is a made-up, benign
string set for the test alone; every site is a scratch site under ``tmp_path``.
"""

from __future__ import annotations

import base64
import html
import json
from urllib.parse import quote

import pytest
from conftest import ROOT, make_site

from sidebyside import publish
from sidebyside.publish import secrets
from sidebyside.publish.common import PublishError

HEAD = "---\nlayout: post\ntitle: T\n---\n\n"
SLUG = "hostile-output"
VALUE = (
    'benign-test-value/+?&="42>>>???'  # made up; holds what base64, URL and JSON encode otherwise
)
NAME = "SIDEBYSIDE_TEST_API_TOKEN"


def _record(**metrics) -> dict:
    return {
        "slug": SLUG,
        "notebook": "n",
        "profile": "smoke",
        "executed_at": "2026-11-22T00:00:00+00:00",
        "source_hash": "k",
        "provenance": {"device": "cpu", "git_sha": "abc"},
        "metrics": metrics,
    }


def _info():
    return publish.notebook_info(ROOT / "tests" / "fixtures" / "hostile" / "00_hostile.py")


def _files(site) -> dict[str, bytes]:
    return {
        p.relative_to(site).as_posix(): p.read_bytes()
        for p in sorted(site.rglob("*"))
        if p.is_file() and ".sidebyside" not in p.parts
    }


ENCODED = {
    "as it is": VALUE,
    "reversed": VALUE[::-1],
    "base64": base64.b64encode(VALUE.encode()).decode(),
    "base64, at offset 1": base64.b64encode(b"x" + VALUE.encode()).decode(),
    "base64, at offset 2": base64.b64encode(b"xy" + VALUE.encode() + b"tail").decode(),
    "URL-safe base64": base64.urlsafe_b64encode(VALUE.encode()).decode(),
    "hex": VALUE.encode().hex(),
    "hex, upper case": VALUE.encode().hex().upper(),
    "URL-encoded": quote(VALUE, safe=""),
    "JSON-escaped": json.dumps(VALUE)[1:-1],
    "HTML-escaped": html.escape(VALUE),
}


@pytest.mark.parametrize("how", sorted(ENCODED))
def test_every_simple_form_of_a_secret_is_found(how):
    found = secrets.findings({"images/s/tables.csv": f"a,b\n1,{ENCODED[how]}\n"}, {NAME: VALUE})
    assert len(found) == 1 and found[0].startswith(
        f"images/s/tables.csv: the value of ${NAME} ("
    ), found
    assert how in found[0] and VALUE not in found[0]


@pytest.mark.parametrize("where", ["post", "record", "download", "svg", "png"])
def test_a_post_holding_a_secret_is_refused_naming_file_and_variable(tmp_path, monkeypatch, where):
    monkeypatch.setenv(NAME, VALUE)
    site = make_site(tmp_path / "site")
    publish.publish(site, _info(), HEAD + "first\n", {"figure-1.png": b"\x89PNG first"}, _record())
    before = _files(site)
    post, images, record = HEAD + "x\n", {"figure-1.png": b"\x89PNG"}, _record()
    hidden = base64.b64encode(VALUE.encode()).decode()
    if where == "post":
        post = HEAD + f"printed: {VALUE[::-1]}\n"
    elif where == "record":
        record = _record(note=f"token={hidden}")
    elif where == "download":
        images[f"{SLUG}.ipynb"] = json.dumps(
            {"cells": [{"outputs": [{"text": quote(VALUE, safe="")}]}]}
        ).encode()
    elif where == "svg":
        svg = f'<svg xmlns="http://www.w3.org/2000/svg"><text>{VALUE.encode().hex()}</text></svg>'
        images["plot.svg"] = svg.encode()
    else:
        images["figure-1.png"] = b"\x89PNG\r\n\x1a\n" + b"\x00tEXt" + VALUE.encode() + b"\x00IEND"
    with pytest.raises(PublishError) as err:
        publish.publish(site, _info(), post, images, record)
    said = str(err.value)
    where_file = {
        "post": f"_posts/2026-11-01-{SLUG}.md",
        "record": f"_data/results/{SLUG}.json",
        "download": f"images/{SLUG}/{SLUG}.ipynb",
        "svg": f"images/{SLUG}/plot.svg",
        "png": f"images/{SLUG}/figure-1.png",
    }[where]
    assert f"{where_file}: the value of ${NAME}" in said, said
    assert VALUE not in said and VALUE[::-1] not in said and hidden not in said
    assert "Nothing published was changed" in said
    assert _files(site) == before


def test_a_post_without_a_secret_is_published_with_secrets_in_the_environment(
    tmp_path, monkeypatch
):
    monkeypatch.setenv(NAME, VALUE)
    site = make_site(tmp_path / "site")
    publish.publish(
        site, _info(), HEAD + "benign-test-valu and 42\n", {"figure-1.png": b"\x89PNG"}, _record()
    )
    assert (site / "_data" / "results" / f"{SLUG}.json").is_file()


@pytest.mark.parametrize(
    "name, value, looked_for",
    [
        ("GITHUB_TOKEN", "ghp_benign_made_up", True),
        ("aws_secret_access_key", "made/up/benign", True),
        ("MY_PASSWD", "benignpass", True),
        ("HF_AUTH", "benign-auth", True),
        ("SESSION_COOKIE", "cookie-benign", True),
        ("DB_CREDENTIALS", "user:benign", True),
        ("OPENAI_API_KEY", "sk-benign-made-up", True),
        ("SHORT_TOKEN", "1234567", False),  # under MIN_LENGTH: found by chance everywhere
        ("PATH", "/usr/local/bin:/usr/bin", False),
        ("HOME", "/root/benign", False),
        (
            "SSH_AUTH_SOCK",
            "/tmp/ssh-benign/agent.1",
            False,
        ),  # the address of a socket, never a secret
    ],
)
def test_which_variables_are_secrets(name, value, looked_for):
    assert (name in secrets.secret_values({name: value})) is looked_for


def test_forms_are_long_enough_and_distinct():
    forms = secrets.forms("abcdefgh")
    assert [how for how, _ in forms][0] == "as it is"
    assert len({form for _, form in forms}) == len(forms)
    assert all(len(form) >= secrets.MIN_LENGTH for _, form in forms)
