"""Exec: a command in a container through the `pods/exec` subresource (`execstream`,
the WebSocket conversation) and what it reports (`execresult`, the status channel)."""
