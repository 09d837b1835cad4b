"""Watch: list+watch informers (`informer`), their settings, counters and the client
part they use (`informertypes`), how a failed list or watch is reported
(`informerfailures`), the watch event parser (`watchevents`) and the store of
projected objects (`cache`)."""
