"""The driver's timing and figures (trusted): both sides timed in interleaved blocks, the checks of the workers' clocks and CPU against the driver's own, energy and memory, the noise of a speedup.
"""
