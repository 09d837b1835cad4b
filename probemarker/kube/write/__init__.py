"""Write: JSON patches of pods/status (`statuswrite`), events (`events`), and the
client-side budget every write waits for (`ratelimit`, a token bucket)."""
