"""The HTTP edge and composition root: aiohttp app, pydantic schemas, OpenAPI, auth and the CLI."""
