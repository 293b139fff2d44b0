"""What an evaluation runs on: the device's description, what the driver does differently per kind, the timed phase's lock, NVML, a CPU's caches and peaks.
"""
