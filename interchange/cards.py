"""Character cards as role-play front ends export them (SillyTavern, RisuAI, chub…), read without I/O: `read_card`
takes the bytes of an upload and gives an `ImportedCard`.

The container is told by its first bytes, never by a file name: the PNG signature is a PNG card
(`card_png_chunks`), `PK\\x03\\x04` a CHARX zip (`card_charx`), anything else card JSON (`card_data`, which also
maps every spec to one `data` object). Other known formats (JPEG, GIF, an empty zip, gzip) are refused by name, and
the size of the upload is checked before anything is inflated or decoded. Cards are written by `card_export`.
"""

from __future__ import annotations

from interchange.card_charx import ZIP_SIGNATURE, read_charx
from interchange.card_data import CardFormatError, CardLimits, ImportedCard, card_from_json
from interchange.card_png_chunks import PNG_SIGNATURE, read_png

OTHER_FORMATS = (
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"PK\x05\x06", "an empty zip"),
    (b"\x1f\x8b", "a gzip file"),
)


def read_card(raw: bytes, limits: CardLimits = CardLimits()) -> ImportedCard:
    """The card in an upload: a PNG with card text chunks, a CHARX zip or card JSON (V1, V2, V3, TavernAI)."""
    if not raw:
        raise CardFormatError("the upload is empty")
    if len(raw) > limits.max_bytes:
        raise CardFormatError(f"the upload is {len(raw)} bytes, more than the limit of {limits.max_bytes}")
    if raw.startswith(PNG_SIGNATURE):
        return read_png(raw, limits)
    if raw.startswith(ZIP_SIGNATURE):
        return read_charx(raw, limits)
    for magic, what in OTHER_FORMATS:
        if raw.startswith(magic):
            raise CardFormatError(f"the upload is {what}; a card is a PNG, a CHARX zip or JSON")
    card = card_from_json(raw, "body", limits)
    return ImportedCard(card.data, card.spec, "json", None, {}, card.warnings)
