"""Recall: lexical and dense indexes over a story's passages, and the fusion of what each finds."""
