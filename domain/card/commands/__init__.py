"""The card's and its lorebooks' commands, each run on the application's aggregates."""
