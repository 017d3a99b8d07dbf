"""Noctaya domain core: pure policy with no Kubernetes, HTTP or gRPC dependency."""
