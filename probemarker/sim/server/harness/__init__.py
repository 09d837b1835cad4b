"""What the tests and the command line hold the simulated API server by, beside what a
real one serves: the faults a test injects at run time, failing, delaying and cutting
requests and streams (`faults`), every answered request counted (`accounting`), and the
throw-away certificate authority of the HTTPS mode (`tls`).

Over the handlers (the faults close and stall their watch streams); under the
application, which applies the faults and records the accounting on every request.
"""
