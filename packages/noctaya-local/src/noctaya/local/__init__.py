"""Local mode: one LLMService served on one machine, its engine scaled to zero.

The service is planned by the operator's planner (`plan`), and the plan runs through local mode's
`WorkloadOrchestrator` (`workloads`): the gateway as a child process configured exactly as the
operator configures it, and local stand-ins for the rest of the cluster: the backend Service (a
loopback port), KEDA (a `StreamIsActive` subscriber that starts and stops the engine) and the
kubelet (process groups, the readiness check, SIGTERM then SIGKILL). Kubernetes is where a
service goes when it outgrows one machine; the YAML stays the same.
"""
