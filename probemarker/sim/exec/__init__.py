"""pods/exec over WebSocket: the channel protocol (`session`, `proto`), the refusals
answered before an upgrade (`plan`), the container an exec targets (`target`) and
what runs the command (`runners`: a host subprocess in a scratch working directory, or a Python handler),
and the sessions a server has open (`tracking`)."""
