"""Finding the patch in the scribe's answer: fenced or in prose, the first object that parses, never a raise."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.tree.rules.scene import parse_scribe_output


@pytest.mark.parametrize(
    ("text", "patch"),
    [
        ('{"patch": {"time": "夜"}}', {"time": "夜"}),
        ('```json\n{"patch": {"time": "夜"}}\n```', {"time": "夜"}),
        ('```\n{"patch": {"time": "夜"}}\n```', {"time": "夜"}),
        ('好的，账本如下：\n{"patch": {"time": "夜"}}\n以上。', {"time": "夜"}),
        ('说明 ```json\n{"patch": {"location": "港"}}\n``` 完毕 {"patch": {}}', {"location": "港"}),
        ('```json\n{"patch": {"time": "夜"}}', {"time": "夜"}),
        ('{"patch": {"flags": {"暗号": "} 和 {"}}}', {"flags": {"暗号": "} 和 {"}}),
        ('{"patch": {"flags": {"引语": "他说：\\"{\\""}}}', {"flags": {"引语": '他说："{"'}}),
        ('{不是 json} {"patch": {"time": "夜"}}', {"time": "夜"}),
        ('{"patch": {"time": "第一行\n第二行"}}', {"time": "第一行\n第二行"}),
    ],
    ids=[
        "plain",
        "json-fence",
        "bare-fence",
        "prose-around",
        "fence-wins",
        "unclosed-fence",
        "braces-in-strings",
        "escaped-quotes",
        "first-that-parses",
        "raw-newline-in-string",
    ],
)
def test_parse_scribe_output_finds_the_patch(text: str, patch: dict[str, Any]) -> None:
    assert parse_scribe_output(text) == {"patch": patch}


@pytest.mark.parametrize("text", ["", "没有变化。", "{", '{"patch": ', "}{", "[1, 2]", '{"a": 1,}', "{'patch': 1}"])
def test_parse_scribe_output_is_none_when_nothing_parses(text: str) -> None:
    assert parse_scribe_output(text) is None


@pytest.mark.parametrize(
    "text", ['{"patch": []}', '{"patch": "none"}', '{"patch": null}', '{"patch": 3}', '{"changes": {"time": "夜"}}']
)
def test_parse_scribe_output_patch_is_empty_when_not_an_object(text: str) -> None:
    parsed = parse_scribe_output(text)
    assert parsed is not None
    assert parsed["patch"] == {}


def test_parse_scribe_output_takes_an_inner_object_when_the_outer_is_unbalanced() -> None:
    assert parse_scribe_output('{"patch": {"time": "夜"}') == {"time": "夜", "patch": {}}


def test_parse_scribe_output_keeps_other_top_level_keys() -> None:
    assert parse_scribe_output('{"patch": {}, "warnings": ["x"]}') == {"patch": {}, "warnings": ["x"]}


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet='{}[]":,\\ abn01`json\n', max_size=60))
def test_parse_scribe_output_never_raises_and_patch_is_an_object(text: str) -> None:
    parsed = parse_scribe_output(text)
    assert parsed is None or isinstance(parsed["patch"], dict)
