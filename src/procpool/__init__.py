"""Warm worker processes, shared by fray's LocalCluster and zephyr's `processes` backend.

A worker (`procpool.process.WorkerProcess`) is a process that answers requests (bytes) with replies
(bytes), one at a time, with a handler function named `module:function`; a `procpool.pool.Pool`
keeps idle ones warm for the next request. How a worker starts (a fresh interpreter, a fork, a
forkserver child) and what a request means are the caller's choice. This package imports nothing
of marin, fray or zephyr, and this file imports nothing at all: a fresh worker
(`python -m procpool.serve`) starts with only what it needs.
"""
