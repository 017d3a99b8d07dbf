"""The Kubernetes adapters: the operator, its controllers and the `noctaya` command.

Every module here reaches the `kubernetes` client, so the package loads it lazily first
(`lean_kubernetes`): the operator and the command hold only the parts of it they use.
"""

from noctaya.k8s import lean_kubernetes

lean_kubernetes.install()
