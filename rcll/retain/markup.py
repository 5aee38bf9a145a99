"""Markup is not memory: the lines a text loses before it is chunked (issue 22 item 4).

Converted documents (markitdown's Markdown from HTML, DOCX, ...) and Markdown files carry
lines that hold no words — table separator rows (``| --- | --- |``), rows of empty cells
(``|  |  |``), rules (``---``, ``* * *``), bare heading marks — and navigation chrome, lines
made only of links such as ``[Top](#top) | [Next](next.html)``. Stored as units they are
identical across documents and flood dedup with pairs of boilerplate. :func:`strip_markup`
removes them; every other line is kept exactly as it was, so a table keeps its header and
data rows, and prose keeps its words.

A line is *markup only* when, outside a fenced code block (```` ``` ```` / ``~~~``, kept
whole), it is made only of :data:`MARKUP_CHARS` and whitespace, or only of Markdown links
and images and such characters with either two links or images or more, or one link
within the site (``#top``, ``next.html``: no URL scheme), or images without alt text. A
single link to an absolute URL with words in it (a reference) is kept.
"""

from __future__ import annotations

import re
import string

# ASCII punctuation, box drawing, bullets, dashes, guillemets, no-break and zero-width spaces
MARKUP_CHARS = frozenset(string.punctuation + "•·◦▪‣–—―…«»‹›¦§¶" + "\u00a0\u200b\ufeff"
                         + "".join(chr(c) for c in range(0x2500, 0x2580)))
_IMAGE = re.compile(r"!\[([^\]\n]*)\]\([^)\n]*\)")
_LINK = re.compile(r"\[([^\]\n]*)\]\(([^)\n]*)\)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")


def _only_markup(text: str) -> bool:
    return all(c in MARKUP_CHARS or c.isspace() for c in text)


def markup_only_line(line: str) -> bool:
    """Whether ``line`` (one line, outside a code block) holds nothing but markup: see the
    module's rule. A blank line is not (it is whitespace, kept as it is)."""
    if not line.strip():
        return False
    if _only_markup(line):
        return True
    if "[" not in line:  # no link or image: words or other characters than markup
        return False
    images = len(_IMAGE.findall(line))
    line = _IMAGE.sub(lambda m: m.group(1), line)  # an image inside a link: its alt text
    links = list(_LINK.finditer(line))
    if not _only_markup(_LINK.sub("", line)):
        return False
    if not links:
        return images > 0 and _only_markup(line)  # images without alt text
    if len(links) + images >= 2:
        return True
    label, target = links[0].groups()
    # one link: navigation when it points inside the site (``#top``, ``next.html``)
    return not _SCHEME.match(target.strip()) or _only_markup(label)


def strip_markup(text: str) -> str:
    """``text`` without its markup-only lines (:func:`markup_only_line`). A dropped line
    inside a table (a line starting with ``|``) goes with its line end, so the table's rows
    stay together; any other dropped line leaves one blank line (a paragraph boundary), never
    two in a row. Lines of fenced code blocks are kept. Text without such lines is returned
    unchanged; text made only of markup gives ``""``. Raises nothing."""
    lines = text.split("\n")
    out: list[str] = []
    fence: str | None = None
    dropped = False
    for line in lines:
        m = _FENCE.match(line)
        if fence is not None:
            out.append(line)
            if m and m.group(1) == fence:
                fence = None
            continue
        if m:
            fence = m.group(1)
            out.append(line)
            continue
        if markup_only_line(line):
            dropped = True
            if not line.lstrip().startswith("|") and out and out[-1].strip():
                out.append("")
            continue
        if dropped and not line.strip() and out and not out[-1].strip():
            continue  # the blank line a dropped line left already separates
        out.append(line)
    if not dropped:
        return text
    return "\n".join(out).strip()


def is_markup_only(text: str) -> bool:
    """Whether ``text`` has no words once its markup-only lines are gone (such a unit is never
    a dedup proposal, :mod:`rcll.store.dedup`)."""
    return not strip_markup(text).strip()
