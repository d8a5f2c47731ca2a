"""The write model of changji: aggregates, events and pure rules. No I/O lives here."""
