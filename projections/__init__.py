"""The read side: pure folds over events and paths, and the rebuildable read models."""
