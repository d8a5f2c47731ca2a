"""Background work derived from the read models: the job system (`system.py`) and a worker per job kind."""
