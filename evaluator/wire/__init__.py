"""The typed messages and shared-memory files between the driver and a worker: both ends' code, one module per channel.

What arrives from a candidate's worker is read field by field and checked here; nothing in this package trusts the sender.
"""
