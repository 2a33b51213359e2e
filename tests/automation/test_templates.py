"""Webhook templates substitute dotted paths of the body and evaluate nothing."""

from __future__ import annotations

from nodmix.automation.templates import MAX_RENDERED_CHARS, render


def test_placeholders_take_values_from_the_body() -> None:
    body = {"subject": "Lunch?", "from": {"name": "Anna"}, "tags": ["a", "b"], "n": 3}
    text = render(
        "{{ body.from.name }}: {{body.subject}} [{{body.tags.1}}] {{body.n}}", {"body": body}
    )
    assert text == "Anna: Lunch? [b] 3"


def test_missing_paths_render_empty_and_objects_as_json() -> None:
    body = {"meta": {"id": 7, "ok": True}}
    assert render("x{{body.nope.deeper}}y {{body.meta}}", {"body": body}) == 'xy {"id":7,"ok":true}'


def test_nothing_is_evaluated_and_output_is_capped() -> None:
    body = {"s": "{{body.s}}", "big": "z" * (MAX_RENDERED_CHARS + 10)}
    assert render("{{body.s}} {{ __import__('os') }}", {"body": body}) == (
        "{{body.s}} {{ __import__('os') }}"
    )
    assert len(render("{{body.big}}", {"body": body})) == MAX_RENDERED_CHARS
