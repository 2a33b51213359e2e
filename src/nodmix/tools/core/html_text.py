"""A plain HTML-to-text conversion, used by `web_fetch` when trafilatura finds no main content.

trafilatura deliberately returns nothing for pages it cannot classify as an article (short
pages, app shells, index pages). This keeps all visible text instead: scripts, styles and other
invisible elements are dropped, block elements become line breaks, and headings and list items
keep a little markdown so the structure survives.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

_INVISIBLE = frozenset({"script", "style", "noscript", "template", "svg", "canvas", "iframe"})
_BLOCKS = frozenset(
    {
        "address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl", "dt",
        "fieldset", "figcaption", "figure", "footer", "form", "header", "hr", "li", "main", "nav",
        "ol", "p", "pre", "section", "summary", "table", "tr", "ul",
    }
)  # fmt: skip
_HEADINGS = {f"h{level}": "#" * level for level in range(1, 7)}


class _TextCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title: list[str] = []
        self._hidden = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _INVISIBLE:
            self._hidden += 1
        elif tag == "title":
            self._in_title = True
        elif tag in _HEADINGS:
            self.parts.append(f"\n\n{_HEADINGS[tag]} ")
        elif tag == "li":
            self.parts.append("\n- ")
        elif tag in ("td", "th"):
            self.parts.append(" | ")
        elif tag in _BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _INVISIBLE:
            self._hidden = max(0, self._hidden - 1)
        elif tag == "title":
            self._in_title = False
        elif tag in _HEADINGS or (tag in _BLOCKS and tag != "li"):
            # `li` is left out so list items stay on consecutive lines (each opens with "- ").
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._hidden:
            return
        if self._in_title:
            self.title.append(data)
            return
        self.parts.append(re.sub(r"\s+", " ", data))


def html_to_text(html: str) -> str:
    """The visible text of an HTML document, with the `<title>` as a heading when present."""
    collector = _TextCollector()
    collector.feed(html)
    collector.close()
    lines = [line.strip() for line in "".join(collector.parts).split("\n")]
    body = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    title = " ".join("".join(collector.title).split())
    if title and not body.startswith(f"# {title}"):
        return f"# {title}\n\n{body}" if body else f"# {title}"
    return body
