"""Formats of other systems, read and written without I/O: character cards (JSON, PNG, CHARX), World Info
lorebooks, SillyTavern chat logs."""
