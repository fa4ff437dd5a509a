"""A figure output as the file a post serves: bounded, inert, and saying
nothing about the machine that drew it.

:func:`figure_file` takes one image output (PNG, JPEG or SVG, as the
notebook stored it) and returns the bytes to publish, or raises
:class:`FigureError` saying why the figure cannot be published:

- size: a raster image of more than :data:`MAX_PIXELS` pixels is refused,
  its dimensions read from the file's header before anything is decoded
  (no decompression bomb reaches Pillow);
- every raster (:data:`RASTERS`: PNG, JPEG, GIF, WebP) is decoded and
  encoded again by :func:`reencode`: the file published is one Pillow wrote
  from the pixels alone, so nothing the notebook put around them (comments,
  text chunks, EXIF, colour profiles, trailing bytes, a polyglot's other
  format, front matter) survives, and it begins with its format's signature;
  a raster Pillow cannot decode whole is refused. The executed notebook
  among the downloads passes its binary outputs through :func:`reencode` too
  (:func:`sidebyside.publish.downloads.scrub_notebook`);
- PNG: then made smaller by :func:`sidebyside.lab.viz.optimise_png`, and
  every ancillary chunk dropped (:func:`strip_png`: text, time, colour
  profiles, EXIF, private chunks), whichever version was kept;
- SVG: rebuilt from the allow-list of :mod:`.svg` (nothing runs, nothing
  loads), its text and attribute values passed through the post's scrub
  (local paths, the host name) as the post's text is.
"""

from __future__ import annotations

import base64
import binascii
import struct
import zlib
from collections.abc import Callable

from sidebyside.publish import svg

__all__ = ["figure_file", "reencode", "strip_png", "raster_size", "FigureError", "MAX_PIXELS", "KEPT_PNG_CHUNKS",
           "RASTERS"]

#: The most pixels a raster figure may have (a 4K screen is 8.3 million).
MAX_PIXELS = 40_000_000
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: The chunks a published PNG keeps: the critical ones, and ``tRNS``, which is
#: part of the picture (a palette's transparency), never text.
KEPT_PNG_CHUNKS = frozenset({b"IHDR", b"PLTE", b"IDAT", b"IEND", b"tRNS"})
#: The raster types a notebook may output, and the one format (Pillow's name) each is written in.
RASTERS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WEBP"}


class FigureError(ValueError):
    """A figure that cannot be published; the message says why and what to do."""


def _png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """``(type, body)`` of every chunk of a PNG, in order; FigureError when it is
    not one. Checksums are not checked: :func:`strip_png` writes them anew."""
    if not data.startswith(PNG_SIGNATURE):
        raise FigureError("it is not a PNG file (its signature is wrong)")
    chunks, i = [], len(PNG_SIGNATURE)
    while i < len(data):
        if i + 12 > len(data):
            raise FigureError("it is a truncated PNG file")
        length, kind = struct.unpack(">I4s", data[i:i + 8])
        body = data[i + 8:i + 8 + length]
        if len(body) != length or i + 12 + length > len(data):
            raise FigureError("it is a truncated PNG file")
        chunks.append((kind, body))
        i += 12 + length
        if kind == b"IEND":
            break
    if not chunks or chunks[0][0] != b"IHDR" or len(chunks[0][1]) != 13 or chunks[-1][0] != b"IEND":
        raise FigureError("it is not a whole PNG file (no IHDR first, or no IEND)")
    return chunks


def strip_png(data: bytes) -> bytes:
    """The PNG ``data`` with only :data:`KEPT_PNG_CHUNKS`: the same picture,
    no metadata (a text chunk can hold a path or a host name)."""
    out = [PNG_SIGNATURE]
    for kind, body in _png_chunks(data):
        if kind in KEPT_PNG_CHUNKS:
            out.append(struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body)))
    return b"".join(out)


def raster_size(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG (from its header) or of another raster that
    Pillow can open without decoding it; FigureError when neither can tell."""
    if data.startswith(PNG_SIGNATURE):
        return struct.unpack(">II", _png_chunks(data)[0][1][:8])
    import io
    import warnings

    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            saved, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, None  # only the header is read here
            try:
                with Image.open(io.BytesIO(data)) as image:
                    return image.size
            finally:
                Image.MAX_IMAGE_PIXELS = saved
    except (OSError, ValueError) as exc:
        raise FigureError(f"it is not an image file that can be read ({exc})") from None


def _check_size(data: bytes) -> None:
    width, height = raster_size(data)
    if width * height > MAX_PIXELS:
        raise FigureError(f"it is {width}×{height} pixels, over the limit of {MAX_PIXELS:,} pixels; draw it "
                          "smaller (a smaller figsize or dpi) or save a thumbnail")


def _pixels(frame, alpha: bool):
    """A new image holding only the pixels of ``frame`` (RGB, RGBA with ``alpha``, or L for grey):
    a fresh image, so no ``info`` (comment, EXIF, profile) of the decoded one can be written out."""
    from PIL import Image

    has_alpha = frame.mode in ("RGBA", "LA", "PA", "La", "RGBa") or "transparency" in frame.info
    mode = "RGBA" if alpha and has_alpha else "L" if frame.mode in ("1", "L") else "RGB"
    converted = frame.convert(mode)
    return Image.frombytes(mode, converted.size, converted.tobytes())


def reencode(mime: str, data: bytes) -> bytes:
    """The raster ``data`` decoded and written again by Pillow as the format of ``mime`` (a key of
    :data:`RASTERS`) from its pixels alone: no metadata, comment, text chunk, profile or trailing
    byte of ``data`` survives, and the result starts with its format's signature. JPEG is written at
    quality 90, WebP losslessly, PNG and GIF as they are (lossless). Every frame of an
    animated GIF or WebP is kept (with its duration), all frames together at most
    :data:`MAX_PIXELS` pixels. Raises :class:`FigureError` for a raster over that limit (read from its
    header, before anything is decoded), or one that Pillow cannot decode whole as PNG, JPEG, GIF or
    WebP (truncated, or another format). A PNG's ancillary chunks are dropped before it is decoded
    (:func:`strip_png`)."""
    import io
    import warnings

    from PIL import Image, ImageSequence

    if mime not in RASTERS:
        raise FigureError(f"{mime} is not a raster type the site publishes ({', '.join(RASTERS)})")
    _check_size(data)
    if data.startswith(PNG_SIGNATURE):
        data = strip_png(data)  # the decoder never reads an ancillary chunk (a malformed one cannot stop it)
    fmt = RASTERS[mime]
    frames, durations, budget = [], [], MAX_PIXELS
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=list(RASTERS.values())) as image:
                for frame in ImageSequence.Iterator(image):
                    budget -= frame.width * frame.height
                    if budget < 0:
                        raise FigureError(f"its frames hold more than {MAX_PIXELS:,} pixels in all; save fewer "
                                          "or smaller frames")
                    frame.load()
                    frames.append(_pixels(frame, alpha=fmt != "JPEG"))
                    durations.append(max(0, int(frame.info.get("duration") or 0)))
    except FigureError:
        raise
    except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombWarning,
            Image.DecompressionBombError) as exc:
        raise FigureError(f"it is not a whole PNG, JPEG, GIF or WebP image that can be decoded ({exc})") from None
    out = io.BytesIO()
    options = {"JPEG": {"quality": 90}, "WEBP": {"lossless": True}}.get(fmt, {})
    if len(frames) > 1:
        options.update(save_all=True, append_images=frames[1:], duration=durations, loop=0)
    frames[0].save(out, format=fmt, **options)
    return out.getvalue()


def figure_file(mime: str, payload: str | bytes | list, scrub: Callable[[str], str]) -> bytes:
    """The bytes to publish for one figure output of type ``mime``
    (a raster of :data:`RASTERS`: base64 text; ``image/svg+xml``: the
    document), as the module docstring says; ``scrub`` is the post's scrub
    of local paths and the host name. Raises :class:`FigureError`."""
    if isinstance(payload, list):
        payload = "".join(payload)
    if mime == "image/svg+xml":
        try:
            return svg.sanitise(payload, scrub=scrub)
        except svg.SvgError as exc:
            raise FigureError(str(exc)) from None
    try:
        data = base64.b64decode(payload)
    except (binascii.Error, ValueError) as exc:
        raise FigureError(f"its data is not base64 ({exc})") from None
    data = reencode(mime, data)
    if mime == "image/png":
        from sidebyside.lab.viz import optimise_png

        data = strip_png(optimise_png(data))  # at most viz.MAX_PNG_BYTES, palette where it is smaller
    return data
