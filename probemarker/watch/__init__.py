"""Watch: what the daemon reads of the objects its informers (kube/watch/) keep.

- `markers.py`: PodProbeMarkers as a table of parsed markers (or why one is invalid),
  and which markers are frozen;
- `pods.py`: what is read of a pod, in one room: the fields kept (`POD_FIELDS`), the
  projection the informer and `check` keep (`pod_projection`, with the values of the
  ownership record's annotation and of the keys it names, `read_keys`) and the typed,
  read-only view the stages after it read (`PodView`);
- `annotations.py`: what a projection keeps of an object's annotations (a few values,
  fingerprints of every one, their size: `AnnotationSummary`).

Pure values; the first stage of watch -> match -> schedule -> probe -> decide -> write.
"""
