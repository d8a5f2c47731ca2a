"""The lorebooks a story's context reads: the card's embedded `character_book`, then the books attached to
the card in the order they were attached (the supplement the model writes into among them).

The model's own entries follow the path, as the scene does: an entry written in this story is in force
only where the node that wrote it is on the path (regenerate the reply that invented a person, and the
person is gone with it); an entry written in another story of the card is the card's world while the
node that wrote it is on that story's current path (a branch abandoned there, or a story deleted, takes
it back). An entry the write gate holds for approval takes no part until approved."""

from __future__ import annotations

from collections.abc import Callable, Container
from uuid import UUID

from domain.application import Changji
from domain.card.card import Card
from domain.card.lore import LoreBookView
from domain.card.lorebook import Lorebook
from interchange.lorebook_fields import LorebookFormatError
from interchange.lorebooks import character_book_entries

EMBEDDED = "embedded"
CACHED_BOOKS = 4096


class LoreShelf:
    """Book views for contexts, kept by (book, version): a context costs a lookup per book, not a parse."""

    def __init__(self, app: Changji) -> None:
        self.app = app
        self._views: dict[tuple[UUID, int], LoreBookView | None] = {}

    def books(
        self,
        card: Card,
        story_id: UUID | None = None,
        on_path: Callable[[], Container[object]] = tuple,
        current: Callable[[UUID, UUID], bool] | None = None,
    ) -> list[LoreBookView]:
        """The card's books as a context at a node of `story_id` sees them: `on_path()`, the node ids (as
        strings) of the path to that node; `current(story, node)`, whether a node is on another story's
        current path (None: every entry of another story holds). Both asked only when the model wrote
        entries."""
        views = [self.embedded(card)]
        for book in self.app.lore.lorebooks(card):
            view = self._view(book)
            if view is not None and book.written_at:
                view = _in_force(view, book, story_id, on_path(), current)
            views.append(view)
        return [view for view in views if view is not None and view.entries]

    def embedded(self, card: Card) -> LoreBookView | None:
        """The card's own `character_book` (None: it has none, or one that cannot be read)."""
        key = (card.id, card.version)
        if key not in self._views:
            book = getattr(card.data, "character_book", None)
            view = None
            if isinstance(book, dict):
                try:
                    imported = character_book_entries(book)
                    view = LoreBookView(EMBEDDED, imported.scan, imported.entries)
                except LorebookFormatError:  # a card posted by hand with a malformed book: it has no lore
                    view = None
            self._remember(key, view)
        return self._views[key]

    def _view(self, book: Lorebook) -> LoreBookView | None:
        key = (book.id, book.version)
        if key not in self._views:
            entries = tuple(e for uid, e in book.entries.items() if uid not in book.pending)
            self._remember(key, LoreBookView(str(book.id), book.scan, entries))
        return self._views[key]

    def _remember(self, key: tuple[UUID, int], view: LoreBookView | None) -> None:
        if len(self._views) >= CACHED_BOOKS:
            del self._views[next(iter(self._views))]
        self._views[key] = view


def _in_force(
    view: LoreBookView,
    book: Lorebook,
    story_id: UUID | None,
    on_path: Container[object],
    current: Callable[[UUID, UUID], bool] | None,
) -> LoreBookView:
    """The view with the model's entries that are not in force here left out (the same entries object, so
    what activation prepared of it is used again)."""
    out = set()
    for uid, where in book.written_at.items():
        if where.story_id == story_id:
            if str(where.node_id) not in on_path:
                out.add(uid)
        elif current is not None and not current(where.story_id, where.node_id):
            out.add(uid)
    return LoreBookView(view.book_id, view.scan, view.entries, frozenset(out)) if out else view


def embedded_name(card: Card) -> str:
    """The name a card's own `character_book` gives itself (else `character_book`)."""
    book = getattr(card.data, "character_book", None)
    return str(book.get("name") or "character_book") if isinstance(book, dict) else "character_book"
