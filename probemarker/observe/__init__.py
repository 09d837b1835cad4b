"""Observe: logging setup (metrics and health endpoints come with the production issue)."""
