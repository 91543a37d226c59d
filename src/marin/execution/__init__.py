"""The DAG engine: step specs, cache keys, plans, the runner, status, leases and provenance.

Pure Python: importing it never pulls in torch, ray or transformers.
"""
