"""Outbound adapters implementing domain/ports.py: model clients, tokenizers, offline fallbacks."""
