"""Offline token estimate used until a real tokenizer or a provider's `usage` is available.

CJK characters count about one token each in common BPE vocabularies (DeepSeek, Qwen); other text
about four characters per token. This is an estimate, labelled as such in every explain block.
"""

from __future__ import annotations

import re

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u3000-\u303f\uff00-\uffef]")


class EstimatingCounter:
    name = "estimate:cjk1+chars/4"

    def count(self, text: str) -> int:
        cjk = len(_CJK.findall(text))
        other = len(text) - cjk
        return cjk + (other + 3) // 4
