"""The context for the next turn: the window of verbatim turns, the summary and scene blocks, the explain list."""
