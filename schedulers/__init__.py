"""Background work derived from projections (scene patches, summaries, recaps); see the issues that add it."""
