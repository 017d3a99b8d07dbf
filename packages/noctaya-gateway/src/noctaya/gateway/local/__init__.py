"""Local mode: one LLMService served on one machine, its engine scaled to zero.

The gateway runs as a child process configured exactly as the operator configures it; this
package plays the rest of the cluster: the backend Service (a loopback port), KEDA (a
`StreamIsActive` subscriber that starts and stops the engine) and the kubelet (process groups,
SIGTERM then SIGKILL). Kubernetes is where a service goes when it outgrows one machine; the YAML
stays the same.
"""
