"""The driver's correctness (trusted): the static policy, the trials and their probes, the rechecks of timed calls, the rule for PyTorch inside a candidate, the task check.
"""
