"""Observe: logging setup, health (/healthz, /readyz) and metrics (/metrics), and the
server that answers them (serve.py)."""
