"""Stubs generated from externalscaler.proto by hack/gen-scaler-proto.py; never edit by hand."""
