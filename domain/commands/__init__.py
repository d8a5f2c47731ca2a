"""The application's commands, one group per capability; each is one load → decide → save."""
