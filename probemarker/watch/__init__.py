"""Watch: what the daemon reads of the objects its informers (kube/watch/) keep.

`markers.py` turns PodProbeMarkers into a table of parsed markers (or why one is
invalid); `pods.py` is the typed, read-only view of a pod the stages after it read.
Pure values; the first stage of watch -> match -> schedule -> probe -> decide -> write.
"""
