"""The story tree's commands, one group per capability, each run on the application's aggregates."""
