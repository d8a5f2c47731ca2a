"""The service layer: domain work run off the event loop, the read side kept up, and the composite reads."""
