"""One worker per job kind (`domain/jobs.py` declares the kinds): what the work is, and its prompts."""
