"""The Kubernetes adapters: the operator, its controllers and the `noctaya` command."""
