"""`probemarker status`: what each node's daemon holds, read through the API server or
a socket (`read.py`), by the reader that runs in the daemon's container on the
standard library only (`local.py`), and printed as a table or JSON (`render.py`, pure).
"""
