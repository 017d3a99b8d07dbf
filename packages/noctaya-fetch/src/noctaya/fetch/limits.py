"""Defaults of OCI delivery, shared by the fetcher and the command (which imports no fetcher
before it knows the scheme)."""

DEFAULT_SIZE_CAP = 200 * 1024**3
"""200Gi: four times the default cache PVC; larger artifacts need an explicit cap."""
DEFAULT_CONCURRENCY = 4
"""Blobs downloaded at once: enough to fill a link, few enough to spare the registry."""
