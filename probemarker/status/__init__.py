"""`probemarker status`: what each node's daemon holds, read through the API server
(read.py) and printed as a table or JSON (render.py)."""
