"""A card's memory across its stories: each story's recap, the handbook they merge into (every item with
the stories behind it), the resident summary every new story starts with, and forgetting by source."""
