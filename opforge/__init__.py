"""opforge: faster PyTorch operators from generated GPU kernels, verified by a trusted evaluator."""

__version__ = "0.1.0"
