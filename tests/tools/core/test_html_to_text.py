from __future__ import annotations

from nodmix.tools.core.html_text import html_to_text


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
