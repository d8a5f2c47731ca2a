"""Pure rules of the card's lore: which entries a turn activates, and lore search."""
