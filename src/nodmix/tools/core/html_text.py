"""HTML to readable text with the standard library's parser: `web_fetch`'s own extractor.

`html_to_text(html)` keeps all visible text: scripts, styles and other invisible elements are
dropped, block elements become line breaks, and headings and list items keep a little markdown
so the structure survives. That is what a page trafilatura (the `web` extra) cannot classify as
an article gets (short pages, app shells, index pages).

`main_text(html, url)` is the extraction when the `web` extra is not installed: the page's
`<main>` / `<article>` (or `role="main"`) when it has one, else everything outside the
navigation, header, footer and asides; links become markdown links with absolute URLs.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin

_INVISIBLE = frozenset({"script", "style", "noscript", "template", "svg", "canvas", "iframe"})
_BLOCKS = frozenset(
    {
        "address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl", "dt",
        "fieldset", "figcaption", "figure", "footer", "form", "header", "hr", "li", "main", "nav",
        "ol", "p", "pre", "section", "summary", "table", "tr", "ul",
    }
)  # fmt: skip
_HEADINGS = {f"h{level}": "#" * level for level in range(1, 7)}
_MAIN = frozenset({"main", "article"})
_CHROME = frozenset({"nav", "header", "footer", "aside"})
"""Page furniture left out of the main text when the page marks no main content."""
_VOID = frozenset({"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "wbr"})


class _TextCollector(HTMLParser):
    def __init__(self, base_url: str | None) -> None:
        super().__init__(convert_charrefs=True)
        self.base_url = base_url
        self.parts: list[str] = []
        """Every visible piece of text, in order."""
        self.main: list[str] = []
        """The pieces inside `<main>`/`<article>`/`role="main"`."""
        self.outside_chrome: list[str] = []
        """The pieces outside nav, header, footer and asides."""
        self.title: list[str] = []
        self._hidden = 0
        self._in_title = False
        self._open: list[tuple[str, bool, bool]] = []
        """Open elements: (tag, opens main content, is page chrome)."""
        self._main_depth = 0
        self._chrome_depth = 0
        self._links: list[str | None] = []

    def _add(self, text: str) -> None:
        self.parts.append(text)
        if self._main_depth:
            self.main.append(text)
        if not self._chrome_depth:
            self.outside_chrome.append(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _VOID:
            is_main = tag in _MAIN or dict(attrs).get("role") == "main"
            is_chrome = tag in _CHROME
            self._open.append((tag, is_main, is_chrome))
            self._main_depth += is_main
            self._chrome_depth += is_chrome
        if tag in _INVISIBLE:
            self._hidden += 1
        elif tag == "title":
            self._in_title = True
        elif tag in _HEADINGS:
            self._add(f"\n\n{_HEADINGS[tag]} ")
        elif tag == "li":
            self._add("\n- ")
        elif tag in ("td", "th"):
            self._add(" | ")
        elif tag in _BLOCKS:
            self._add("\n")
        elif tag == "a" and self.base_url is not None and not self._hidden:
            href = dict(attrs).get("href")
            url = urljoin(self.base_url, href) if href else None
            self._links.append(url if url and url.startswith(("http://", "https://")) else None)
            if self._links[-1] is not None:
                self._add("[")

    def handle_endtag(self, tag: str) -> None:
        if tag in _INVISIBLE:
            self._hidden = max(0, self._hidden - 1)
        elif tag == "title":
            self._in_title = False
        elif tag in _HEADINGS or (tag in _BLOCKS and tag != "li"):
            # `li` is left out so list items stay on consecutive lines (each opens with "- ").
            self._add("\n")
        elif tag == "a" and self._links:
            url = self._links.pop()
            if url is not None:
                self._add(f"]({url})")
        self._close(tag)

    def _close(self, tag: str) -> None:
        """Pop `tag` and whatever the page left open inside it (HTML forgives that)."""
        if not any(open_tag == tag for open_tag, _, _ in self._open):
            return
        while self._open:
            open_tag, is_main, is_chrome = self._open.pop()
            self._main_depth -= is_main
            self._chrome_depth -= is_chrome
            if open_tag == tag:
                return

    def handle_data(self, data: str) -> None:
        if self._hidden:
            return
        if self._in_title:
            self.title.append(data)
            return
        self._add(re.sub(r"\s+", " ", data))


def _collect(html: str, base_url: str | None) -> _TextCollector:
    collector = _TextCollector(base_url)
    collector.feed(html)
    collector.close()
    return collector


def _render(parts: list[str], title_parts: list[str]) -> str:
    text = re.sub(r"\[\s*\]\([^)]*\)", "", "".join(parts))  # links with no text
    lines = [line.strip() for line in text.split("\n")]
    body = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    title = " ".join("".join(title_parts).split())
    if title and not body.startswith(f"# {title}"):
        return f"# {title}\n\n{body}" if body else f"# {title}"
    return body


def html_to_text(html: str) -> str:
    """The visible text of an HTML document, with the `<title>` as a heading when present."""
    collector = _collect(html, None)
    return _render(collector.parts, collector.title)


def main_text(html: str, url: str) -> str:
    """The main content of an HTML page as light markdown, links resolved against `url`."""
    collector = _collect(html, url)
    for parts in (collector.main, collector.outside_chrome, collector.parts):
        if "".join(parts).strip():
            return _render(parts, collector.title)
    return _render([], collector.title)
