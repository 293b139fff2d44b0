"""Feedback for the agents: Nsight Compute on a GPU, `perf stat` on a CPU, and the hardened process they profile.
"""
