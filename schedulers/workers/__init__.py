"""One worker per job kind (`domain/tree/jobs.py` declares the kinds): what the work is, and its prompts."""
