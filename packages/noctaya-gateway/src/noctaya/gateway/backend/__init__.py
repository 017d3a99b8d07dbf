"""The backend as the gateway sees it: whether it is ready (`readiness`, polled while requests are
held)."""
