"""The reply's words decoded from a draft tool call's JSON arguments as their fragments arrive."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.tool_stream import ContentStream


def streamed(arguments: str, cuts: list[int]) -> str:
    stream, out, start = ContentStream(), [], 0
    for cut in [*sorted(set(cuts)), len(arguments)]:
        out.append(stream.feed(arguments[start:cut]))
        start = cut
    return "".join(out)


def test_escapes_cut_in_two_wait_for_their_other_half() -> None:
    arguments = json.dumps({"version": 0, "content": '他说："走吧。"\n\\ 😀 end'})  # ascii escapes: \\u, \\n, \\"
    stream = ContentStream()
    pieces = [stream.feed(arguments[i : i + 1]) for i in range(len(arguments))]  # one character at a time
    assert "".join(pieces) == '他说："走吧。"\n\\ 😀 end'
    assert stream.feed('{"more": "x"}') == ""  # the string ended: nothing after it is content


def test_nothing_streams_before_the_content_key_or_without_one() -> None:
    assert streamed('{"version": 3, "separator": "\\n\\n"}', [5, 12]) == ""
    assert streamed('{"version": 1, "content": "好"}', [20]) == "好"


@settings(max_examples=200, deadline=None)
@given(st.text(), st.lists(st.integers(min_value=0, max_value=400), max_size=8), st.booleans())
def test_any_content_cut_anywhere_comes_out_whole(content: str, cuts: list[int], ascii_only: bool) -> None:
    arguments = json.dumps({"version": 0, "content": content}, ensure_ascii=ascii_only)
    decoded = streamed(arguments, [c for c in cuts if c <= len(arguments)])
    assert decoded == content  # (st.text() makes no lone surrogates; an emoji escaped is a surrogate pair)


def test_the_separator_is_the_calls_own_when_it_came_before_the_content() -> None:
    before = ContentStream()
    before.feed('{"version": 2, "separator": "\\n—\\"", "content": "灯')
    assert before.separator() == '\n—"'
    after = ContentStream()  # (said after the words began: the stream cannot wait for it)
    after.feed('{"version": 2, "content": "灯亮了。", "separator": " "}')
    assert after.separator() == "\n\n"
    quoted = ContentStream()  # a separator spelled inside another field's string is that string's
    quoted.feed('{"note": "\\"separator\\": \\"x\\"", "content": "灯')
    assert quoted.separator() == "\n\n"
    assert ContentStream().separator() == "\n\n"
