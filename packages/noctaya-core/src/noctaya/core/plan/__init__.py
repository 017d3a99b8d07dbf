"""The serving plan: all one LLMService needs, decided from (service, runtime, vendor, model).

Vendor-neutral and free of Kubernetes types: `noctaya.k8s.render` turns a plan into objects, and
the same plan could drive another platform. Planning raises the first `NoctayaError` in a fixed
order (ScaledObject, Render, GatewayConfig, Cache, Prewarm), before anything changes.
"""
