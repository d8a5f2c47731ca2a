"""One module per resource; each handler parses, calls the service, and shapes the answer."""
