"""Pure rendering of a serving plan into Kubernetes objects (JSON-ready dicts).

Only the controller talks to the API server; everything here is a function of its arguments.
"""
