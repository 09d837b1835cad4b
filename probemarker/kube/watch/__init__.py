"""Watch: list+watch informers (`informer`), their failures and counters, the watch
event parser (`watchevents`) and the store of projected objects (`cache`)."""
