"""The gateway's Prometheus series (`gateway_metrics`) and the text exposition they are served in
(`exposition`)."""
