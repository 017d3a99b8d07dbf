"""The multi-gateway demand aggregator: one KEDA scaler for a fleet of gateway replicas."""
