from __future__ import annotations

import logging

import pytest

from nodmix.messages import JsonObject
from nodmix.tools.validation import SchemaValidator, is_trivial

SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "offset": {"type": "integer", "minimum": 1},
        "options": {
            "type": "object",
            "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
        },
    },
    "required": ["path"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("schema", "trivial"),
    [
        ({"type": "object", "properties": {}}, True),
        ({"type": "object"}, True),
        ({}, True),
        ({"type": "object", "properties": {}, "additionalProperties": True}, True),
        ({"type": "object", "properties": {}, "additionalProperties": False}, False),
        ({"type": "object", "required": ["x"]}, False),
        ({"type": "object", "properties": {"x": {"type": "string"}}}, False),
        ({"type": "object", "minProperties": 1}, False),
    ],
)
def test_trivial_schemas_are_recognised(schema: JsonObject, trivial: bool) -> None:
    assert is_trivial(schema) is trivial


def test_valid_arguments_have_no_problems() -> None:
    args = {"path": "a", "offset": 2, "options": {"tags": ["x"]}}
    assert SchemaValidator().problems(SCHEMA, args) == []


def test_problems_name_the_argument_path_and_the_rule() -> None:
    args = {"offset": 0, "options": {"tags": ["ok", 3]}, "extra": True}
    assert SchemaValidator().problems(SCHEMA, args) == [
        "'path' is a required property",
        "Additional properties are not allowed ('extra' was unexpected)",
        "`offset`: 0 is less than the minimum of 1",
        "`options.tags[1]`: 3 is not of type 'string'",
    ]


def test_long_offending_values_are_shortened() -> None:
    [long_problem] = SchemaValidator().problems(
        {"type": "object", "properties": {"n": {"type": "integer"}}}, {"n": "y" * 5000}
    )
    assert len(long_problem) <= 310
    assert long_problem.endswith("...")


def test_non_object_arguments_are_a_problem_even_for_trivial_schemas() -> None:
    problems = SchemaValidator().problems({"type": "object"}, ["not", "an", "object"])
    assert problems == ["the arguments must be a JSON object, not list"]


def test_invalid_schema_is_skipped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    broken: JsonObject = {"type": "object", "properties": {"x": {"type": "nonsense"}}}
    with caplog.at_level(logging.WARNING):
        assert SchemaValidator().problems(broken, {"x": 1}) == []
    assert "invalid tool schema" in caplog.text


def test_too_many_problems_are_summarised() -> None:
    schema: JsonObject = {
        "type": "object",
        "properties": {f"p{i}": {"type": "string"} for i in range(15)},
    }
    problems = SchemaValidator().problems(schema, {f"p{i}": i for i in range(15)})
    assert len(problems) == 11
    assert problems[-1] == "... and 5 more problems"
