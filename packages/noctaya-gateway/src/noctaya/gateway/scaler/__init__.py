"""KEDA External Push scaler: how KEDA learns the demand that decides whether a backend exists."""
