"""The chat digests the proxy tells a continued story by: any prefix's digest is the same however it was
reached, and differs when any message of it does."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.tree.rules.reconcile import split_request
from service.proxy_requests import ChatDigests


def chat(texts: list[str]) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": "greeting"}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)
    ]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=20), min_size=1, max_size=12), st.data())
def test_a_prefix_digest_is_the_same_however_it_is_reached_and_changes_with_any_message(
    texts: list[str], data: st.DataObject
) -> None:
    split = split_request(chat(texts))
    k = data.draw(st.integers(0, len(texts)))
    first = data.draw(st.integers(0, len(texts)))
    warm = ChatDigests(split)
    warm.at(first)  # a digest made earlier is extended from
    assert warm.at(k) == ChatDigests(split).at(k)
    if k:
        assert ChatDigests(split).then(k - 1, split.chat[k - 1]) == ChatDigests(split).at(k)
        changed = list(texts)
        changed[k - 1] = changed[k - 1].strip() + " (edited)"
        assert ChatDigests(split_request(chat(changed))).at(k) != ChatDigests(split).at(k)


def test_a_digest_holds_the_roles_too() -> None:
    said = [{"role": "assistant", "content": "g"}, {"role": "user", "content": "a"}]
    one = split_request([*said, {"role": "assistant", "content": "b"}])
    other = split_request([*said, {"role": "user", "content": "b"}])
    assert ChatDigests(one).at(2) != ChatDigests(other).at(2) and ChatDigests(one).at(1) == ChatDigests(other).at(1)
