"""The ground floor: helpers that import nothing of probemarker's.

- `clock`: `Clock`, the monotonic clock every timing rule takes (tests pass a fake);
- `text`: text cut in UTF-8 bytes, as the API server counts them, and shown values;
- `printable`: text escaped for a terminal, a log line or an event (`printable`,
  `printable_json`);
- `histogram`, `repeats`: a fixed-bucket histogram, and "once per interval" for logs;
- `projection`: what an informer keeps of an object (a field projection; a pod's is
  watch/pods.py's);
- `backoff`: capped exponential backoff with jitter;
- `shares`, `fairqueue`: the shares of a budget namespaces use at once, and fair
  queuing by flow (a FIFO per namespace, served in turn).

Everything above may import these; these import only the standard library and
third-party libraries (the import contract in pyproject.toml holds them to it).
"""
