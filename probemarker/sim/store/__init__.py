"""The sim's object world: objects, resourceVersions, watch history, selectors, patches.

`objects.Store` holds every object, with `writes` computing what each write stores,
`listing` reading LIST pages, `watchcache` starting and feeding watches and
`freshness` holding reads that wait for a resourceVersion; `resourcetype` names
resources and addresses objects; `strategy` and `validation` are the per-resource
write rules (what a status write keeps, what is immutable), `patch`/`smp` the three
patch types, `selectors`/`fieldselectors` the query languages, `listopts` the LIST and
WATCH options. Pure but for `Store`, `Watch` and `FreshWaiters`.
"""
