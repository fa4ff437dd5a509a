"""The secrets guard: no value of a secret of the publisher's environment is published.

A second line behind the run's sandbox (whose environment holds no secret): before a post is
written (:func:`sidebyside.publish.site.publish`), :func:`check` scans every file about to be
published (the post's Markdown, its results record, its downloads and figures: text and bytes
alike) for the value of every secret-looking variable of the environment (:func:`secret_values`:
a name holding one of :data:`WORDS`, any case; a value of at least :data:`MIN_LENGTH` characters)
and for its simple encodings (:func:`forms`: reversed, base64 at any alignment, standard or
URL-safe, hex in either case, URL-encoded, JSON- and HTML-escaped). A hit refuses the post,
naming the file, the variable and the encoding, never the value. The names of
:data:`NOT_SECRET` hold the addresses of local sockets and files, never a secret.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
from collections.abc import Mapping
from urllib.parse import quote, quote_plus

from sidebyside.publish.common import PublishError

__all__ = ["WORDS", "MIN_LENGTH", "NOT_SECRET", "secret_values", "forms", "findings", "check"]

#: A variable whose name holds one of these (any case) is taken to hold a secret.
WORDS = ("TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE", "SESSION")
#: The shortest value looked for (a shorter one would be found by chance).
MIN_LENGTH = 8
#: Names that hold one of :data:`WORDS` but, by their definition, the address of a local socket or
#: file (a desktop session's), never a secret.
NOT_SECRET = frozenset(
    {
        "SSH_AUTH_SOCK",
        "XAUTHORITY",
        "DBUS_SESSION_BUS_ADDRESS",
        "SESSION_MANAGER",
        "XDG_SESSION_ID",
        "XDG_SESSION_TYPE",
        "XDG_SESSION_CLASS",
        "XDG_SESSION_DESKTOP",
        "DESKTOP_SESSION",
        "GNOME_KEYRING_CONTROL",
    }
)
_NAME = re.compile("|".join(WORDS), re.I)


def secret_values(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{name: value}`` of the secret-looking variables of ``environ`` (the process's environment
    when None), as the module docstring says."""
    environ = os.environ if environ is None else environ
    return {
        name: value
        for name, value in environ.items()
        if _NAME.search(name) and name not in NOT_SECRET and len(value.strip()) >= MIN_LENGTH
    }


def _base64(data: bytes) -> list[tuple[str, bytes]]:
    """The base64 text of ``data`` wherever it starts in a longer encoded text: for each of the
    three alignments, the characters that ``data`` alone decides (standard and URL-safe
    alphabets)."""
    out = []
    for offset, start in ((0, 0), (1, 2), (2, 3)):
        encoded = base64.b64encode(b"\0" * offset + data)
        whole = encoded[start : (8 * (offset + len(data))) // 6]
        if len(whole) >= MIN_LENGTH:
            where = "" if offset == 0 else f", at offset {offset}"
            out.append((f"base64{where}", whole))
            if whole != whole.translate(bytes.maketrans(b"+/", b"-_")):
                out.append(
                    (f"URL-safe base64{where}", whole.translate(bytes.maketrans(b"+/", b"-_")))
                )
    return out


def forms(value: str) -> list[tuple[str, bytes]]:
    """``(encoding, bytes)`` of every form of ``value`` that :func:`check` looks for, the value
    itself first; forms equal to one before are left out."""
    raw = value.encode("utf-8")
    candidates = [
        ("as it is", raw),
        ("reversed", value[::-1].encode("utf-8")),
        *_base64(raw),
        ("hex", raw.hex().encode()),
        ("hex, upper case", raw.hex().upper().encode()),
        ("URL-encoded", quote(value, safe="").encode()),
        ("URL-encoded", quote_plus(value).encode()),
        ("JSON-escaped", json.dumps(value)[1:-1].encode()),
        ("JSON-escaped", json.dumps(value, ensure_ascii=False)[1:-1].encode("utf-8")),
        ("HTML-escaped", html.escape(value).encode("utf-8")),
    ]
    seen: set[bytes] = set()
    out = []
    for name, form in candidates:
        if form not in seen:
            seen.add(form)
            out.append((name, form))
    return out


def findings(
    files: Mapping[str, bytes | str], environ: Mapping[str, str] | None = None
) -> list[str]:
    """``"<file>: the value of $NAME (encoding)"`` for every secret of ``environ``
    (:func:`secret_values`) found in one of ``files`` (``{published path: bytes or text}``), in
    the order of the files; the value itself is never in the answer."""
    looked_for = [
        (name, how, form)
        for name, value in sorted(secret_values(environ).items())
        for how, form in forms(value)
    ]
    found = []
    for path, data in files.items():
        data = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        hits: dict[str, list[str]] = {}
        for name, how, form in looked_for:
            if form in data and how not in hits.get(name, []):
                hits.setdefault(name, []).append(how)
        found += [
            f"{path}: the value of ${name} ({', '.join(hows)})" for name, hows in hits.items()
        ]
    return found


def check(
    slug: str, files: Mapping[str, bytes | str], environ: Mapping[str, str] | None = None
) -> None:
    """Raise :class:`PublishError` when any of ``files`` (``{published path: bytes or text}``) holds
    a secret of ``environ`` in any form (:func:`findings`), naming each file and variable."""
    found = findings(files, environ)
    if found:
        raise PublishError(
            f"{slug}: the post would publish the value of a secret of the publisher's environment "
            "(the value is not shown here):\n  "
            + "\n  ".join(found[:20])
            + ("\n  ..." if len(found) > 20 else "")
            + "\nFind where the notebook reads or prints it (os.environ, a config file, an error "
            "message holding a URL or a header) and keep it out; run the publisher without "
            "the variable where it is not needed. Nothing published was changed."
        )
