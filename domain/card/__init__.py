"""The card and its lore: a character card (its fields verbatim, its settings, the file it came from),
the lorebooks attached to it, their events, the rules of lore activation and search, and the commands
that change them."""
