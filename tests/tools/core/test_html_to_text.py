from __future__ import annotations

from nodmix.tools.core.html_text import html_to_text, main_text


def test_scripts_styles_and_hidden_elements_are_dropped() -> None:
    html = (
        "<html><head><style>p{color:red}</style></head><body><p>Visible</p>"
        "<script>alert('x')</script><noscript>Enable JS</noscript><template>T</template></body>"
    )
    assert html_to_text(html) == "Visible"


def test_structure_survives_as_light_markdown() -> None:
    html = (
        "<body><h2>Menu</h2><ul><li>Soup</li><li>Bread &amp; butter</li></ul>"
        "<p>Line one<br>Line   two</p></body>"
    )
    assert html_to_text(html) == "## Menu\n\n- Soup\n- Bread & butter\n\nLine one\nLine two"


def test_title_becomes_a_heading_unless_the_body_starts_with_it() -> None:
    assert html_to_text("<title>Docs</title><p>Body</p>") == "# Docs\n\nBody"
    assert html_to_text("<title>Docs</title><h1>Docs</h1><p>Body</p>") == "# Docs\n\nBody"


def test_main_text_keeps_the_main_element_and_its_links() -> None:
    html = (
        "<title>Fox Notes</title><body><nav><a href='/'>Home</a></nav>"
        "<main><h1>Fox Notes</h1><p>The fox is <a href='/more'>quick</a>.</p>"
        "<p><a href='javascript:void(0)'>menu</a> and <a href='#top'><img></a></p></main>"
        "<footer>Copyright 2026</footer></body>"
    )
    assert main_text(html, "https://example.org/notes/") == (
        "# Fox Notes\n\nThe fox is [quick](https://example.org/more).\n\nmenu and"
    )


def test_main_text_without_a_main_element_drops_the_page_chrome() -> None:
    html = (
        "<body><header>Site</header><nav><ul><li>A</li></ul></nav><div role='banner'></div>"
        "<div><p>Body text</p></div><aside>Ads</aside><footer>Legal</footer></body>"
    )
    assert main_text(html, "https://example.org/") == "Body text"


def test_main_text_of_a_page_that_is_all_chrome_keeps_everything() -> None:
    html = "<title>Shell</title><body><nav>Only links here</nav></body>"
    assert main_text(html, "https://example.org/") == "# Shell\n\nOnly links here"


def test_unclosed_elements_inside_main_do_not_leak_past_it() -> None:
    html = "<article><div><p>Inside</article><footer>Outside</footer>"
    assert main_text(html, "https://example.org/") == "Inside"
