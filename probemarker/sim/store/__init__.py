"""The sim's object world: objects, resourceVersions, watch history, selectors, patches.

`objects.Store` holds every object; `strategy` and `validation` are the per-resource
write rules (what a status write keeps, what is immutable), `patch`/`smp` the three
patch types, `selectors`/`fieldselectors` the query languages. Pure but for `Watch`.
"""
