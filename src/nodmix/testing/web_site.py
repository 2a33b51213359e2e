"""A small website on 127.0.0.1 for driving the browser tool: forms, links, a page that
changes after a click, pages that try to reach private addresses, and hostile pages.

    with TestSite() as site:
        site.url("/form")

Pages:
- `/` links to the others; `/article` is a typical article page (the snapshot benchmark);
- `/form` a form (name, colour, a checkbox) posting to `/submitted`, which says what it got;
- `/changes` a button that rewrites the page without a navigation;
- `/private` a page that tries `localhost` (the same server under a name that is not
  allowed) by fetch, an image, a WebSocket and an iframe, and shows what got through;
  `/secret` records every hit in `site.secret_hits`;
- `/cookie?set=V` sets a cookie that `/cookie` shows; `/redirect?to=URL` a 302 to URL;
- `/popups` opens 10 tabs; `/huge?n=N` N list items (20,000);
- `/slow` sends half a page and never finishes; `/download/small` a 2 KiB attachment;
  `/download/endless` an attachment that never ends; `/download/many?n=N` a page that starts
  N downloads (1 KiB each, one every 100 ms) as it loads.
"""

from __future__ import annotations

import html
import json
from collections.abc import AsyncIterator

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from nodmix.testing.http_thread import ThreadedServer

_PAGE = (
    "<!doctype html><html><head><meta charset=utf-8><title>{title}</title>{head}</head>"
    "<body>{body}</body></html>"
)


def page(title: str, body: str, head: str = "") -> HTMLResponse:
    """An HTML page."""
    return HTMLResponse(_PAGE.format(title=html.escape(title), body=body, head=head))


ARTICLE = """
<header class="site-header u-p-4"><nav class="nav u-m-2">
{icon}<a class="nav-link" href="/">Home</a> {icon}<a class="nav-link" href="/form">Contact</a>
{icon}<a class="nav-link" href="/changes">Demo</a>
{icon}<a class="nav-link" href="/article">News</a></nav></header>
<main><article><h1>Trains from Lisbon to Porto</h1>
<p class="byline">By the editors, <time datetime="2026-11-02">2 November 2026</time></p>
{paragraphs}
<h2>Prices</h2>
<table><thead><tr><th>Train</th><th>Time</th><th>Price</th></tr></thead><tbody>
{rows}
</tbody></table>
<p><a href="/form">Ask us a question</a></p></article>
<aside><h2>Related</h2><ul>{related}</ul></aside></main>
<footer><p>© Example News</p><a href="/">Privacy</a> <a href="/">Terms</a></footer>
"""


def article_head() -> str:
    """What a typical news page carries besides its text: meta tags, inlined critical CSS,
    structured data and a tag-manager script (about 20 KB; real pages often carry more)."""
    css = "".join(
        f".u-{name}-{i}{{{prop}:{i * 4}px}}"
        for i in range(40)
        for name, prop in (("m", "margin"), ("p", "padding"), ("w", "width"), ("h", "height"))
    )
    meta = "".join(
        f'<meta property="og:{k}" content="Trains from Lisbon to Porto {k}">'
        for k in ("title", "description", "site_name", "type", "url", "image")
    )
    data = json.dumps(
        {
            "@context": "https://schema.org",
            "@type": "NewsArticle",
            "headline": "Trains from Lisbon to Porto",
            "datePublished": "2026-11-02",
            "author": [{"@type": "Person", "name": f"Editor {i}"} for i in range(5)],
        }
    )
    script = (
        "window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push(arguments)}"
        + "".join(f"gtag('event','view_{i}',{{section:'travel',slot:{i}}});" for i in range(60))
    )
    return (
        f'<meta name="viewport" content="width=device-width, initial-scale=1">{meta}'
        f'<style>{css}</style><script type="application/ld+json">{data}</script>'
        f"<script>{script}</script>"
    )


ICON = (
    '<svg class="icon" width="16" height="16" viewBox="0 0 16 16" aria-hidden="true">'
    '<path d="M8 0a8 8 0 1 0 0 16A8 8 0 0 0 8 0zm0 14.5a6.5 6.5 0 1 1 0-13 6.5 6.5 0 0 1 0 13z'
    'M7.25 4h1.5v5h-1.5zm0 6.5h1.5V12h-1.5z"/></svg>'
)


def article() -> str:
    """The body of a typical article page (markup-heavy, as real pages are)."""
    paragraph = (
        '<p class="text-base leading-7 text-gray-800" data-track="para">The Alfa Pendular '
        "leaves Santa Apolónia every hour and reaches Campanhã in under three hours; the "
        'Intercidades is slower and cheaper. <span class="note">Book early</span> for the '
        'best fares, and <a class="inline-link" href="/article">read our guide</a>.</p>'
    )
    rows = "".join(
        f'<tr class="row"><td>AP {100 + i}</td><td>{6 + i}:00</td><td>€{25 + i}.90</td></tr>'
        for i in range(12)
    )
    related = "".join(
        f'<li class="card"><div class="wrap"><a class="card-link" href="/article?{i}">'
        f"<span>Story {i}</span></a></div></li>"
        for i in range(10)
    )
    return ARTICLE.format(paragraphs=paragraph * 8, rows=rows, related=related, icon=ICON)


class TestSite(ThreadedServer):
    """The site; `secret_hits` counts requests that reached `/secret`."""

    __test__ = False  # not a pytest class
    ws_protocol = "websockets-sansio"

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host=host, port=port)
        self.secret_hits: list[str] = []
        self.submissions: list[dict[str, str]] = []

    def url(self, path: str = "/") -> str:
        """An address on the site by its IP (`http://127.0.0.1:<port>/...`)."""
        return f"http://{self.host}:{self.port}{path}"

    def private_url(self, path: str = "/secret") -> str:
        """The same server under the name `localhost` (private, not in `allowHosts`)."""
        return f"http://localhost:{self.port}{path}"

    async def _index(self, request: Request) -> Response:
        links = "".join(
            f'<li><a href="{p}">{t}</a></li>'
            for p, t in [("/form", "Contact form"), ("/changes", "Changing page"),
                         ("/article", "Article"), ("/private", "Private probe")]
        )  # fmt: skip
        return page("Test site", f"<h1>Test site</h1><ul>{links}</ul>")

    async def _article(self, request: Request) -> Response:
        return page("Trains from Lisbon to Porto", article(), article_head())

    async def _form(self, request: Request) -> Response:
        body = """<h1>Contact us</h1>
<form method="post" action="/submitted">
<label>Your name <input name="name" required></label>
<label>Colour <select name="colour"><option value="red">Red</option>
<option value="green">Green</option><option value="blue">Blue</option></select></label>
<label><input type="checkbox" name="news" value="yes"> Send me news</label>
<button type="submit">Send</button></form>"""
        return page("Contact us", body)

    async def _submitted(self, request: Request) -> Response:
        form = await request.form()
        got = {k: str(v) for k, v in form.items()}
        self.submissions.append(got)
        name = html.escape(got.get("name", ""))
        colour = html.escape(got.get("colour", ""))
        return page(
            "Thank you",
            f"<h1>Thank you</h1><p>Thanks, {name}! Your favourite colour is {colour}. "
            "Reference CONF-4711.</p>",
        )

    async def _changes(self, request: Request) -> Response:
        body = """<h1>Before</h1><p id="state">Nothing happened yet.</p>
<button onclick="document.querySelector('h1').textContent='After';
document.getElementById('state').textContent='The button was clicked.';
this.insertAdjacentHTML('afterend','<button>Another button</button>')">Change the page</button>"""
        return page("Changing page", body)

    async def _private(self, request: Request) -> Response:
        target = json.dumps(self.private_url("/secret"))
        ws = json.dumps(f"ws://localhost:{self.port}/ws")
        body = f"""<h1>Private probe</h1><p id="fetch">fetch: pending</p><p id="ws">ws: pending</p>
<img src={target}?img alt="probe"><iframe src={target}?frame title="probe frame"></iframe>
<script>
fetch({target} + '?fetch').then(r => r.text()).then(t => document.getElementById('fetch')
  .textContent = 'fetch: got ' + t, () => document.getElementById('fetch')
  .textContent = 'fetch: blocked');
try {{ const s = new WebSocket({ws});
  s.onopen = () => document.getElementById('ws').textContent = 'ws: open';
  s.onerror = () => document.getElementById('ws').textContent = 'ws: blocked';
}} catch (e) {{ document.getElementById('ws').textContent = 'ws: blocked'; }}
</script>"""
        return page("Private probe", body)

    async def _secret(self, request: Request) -> Response:
        self.secret_hits.append(str(request.url))
        return PlainTextResponse("SECRET-TOKEN")

    async def _ws(self, websocket: WebSocket) -> None:
        self.secret_hits.append("websocket")
        await websocket.accept()
        await websocket.send_text("SECRET-TOKEN")
        await websocket.close()

    async def _cookie(self, request: Request) -> Response:
        value = request.query_params.get("set")
        shown = html.escape(request.cookies.get("visit", "none"))
        response = page("Cookie", f"<h1>Cookie</h1><p>visit cookie: {shown}</p>")
        if value:
            response.set_cookie("visit", value, max_age=3600)
        return response

    async def _redirect(self, request: Request) -> Response:
        return RedirectResponse(request.query_params.get("to", "/"), status_code=302)

    async def _popups(self, request: Request) -> Response:
        body = """<h1>Popups</h1><button onclick="for (let i = 0; i < 10; i++)
window.open('/?tab=' + i, '_blank')">Open many</button>"""
        return page("Popups", body)

    async def _huge(self, request: Request) -> Response:
        count = min(int(request.query_params.get("n", "20000")), 200_000)
        items = "".join(f"<li><a href='/?{i}'>Item number {i}</a></li>" for i in range(count))
        return page("Huge", f"<h1>Huge</h1><ul>{items}</ul>")

    async def _slow(self, request: Request) -> Response:
        async def body() -> AsyncIterator[bytes]:
            yield b"<!doctype html><html><head><title>Slow</title></head><body><h1>Half</h1>"
            await anyio.sleep(3600)

        return StreamingResponse(body(), media_type="text/html")

    async def _download(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name == "many":
            count = min(int(request.query_params.get("n", "15")), 1000)
            # One every 100 ms: Chromium drops downloads started in quick succession.
            script = f"""let i = 0; const one = () => {{ const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([new Uint8Array(1024)]));
  a.download = 'file-' + i + '.bin'; document.body.appendChild(a); a.click();
  if (++i < {count}) setTimeout(one, 100); }}; one();"""
            return page("Many downloads", f"<h1>Many downloads</h1><script>{script}</script>")
        headers = {"Content-Disposition": f'attachment; filename="{name}.bin"'}
        if name == "small":
            return Response(b"x" * 2048, media_type="application/octet-stream", headers=headers)

        async def endless() -> AsyncIterator[bytes]:
            chunk = b"\0" * 65536
            while True:
                yield chunk
                await anyio.sleep(0)

        return StreamingResponse(endless(), media_type="application/octet-stream", headers=headers)

    def build_app(self) -> Starlette:
        """The site's routes."""
        return Starlette(
            routes=[
                Route("/", self._index),
                Route("/article", self._article),
                Route("/form", self._form),
                Route("/submitted", self._submitted, methods=["POST"]),
                Route("/changes", self._changes),
                Route("/private", self._private),
                Route("/secret", self._secret),
                WebSocketRoute("/ws", self._ws),
                Route("/redirect", self._redirect),
                Route("/cookie", self._cookie),
                Route("/popups", self._popups),
                Route("/huge", self._huge),
                Route("/slow", self._slow),
                Route("/download/{name}", self._download),
            ]
        )
