"""The story tree: a story (one play-through of a card: its leaf, settings, save points) and its nodes
(greeting, user and reply nodes with their annotations), their events, the rules over paths, drafts,
summaries and the scene, and the commands that change them."""
