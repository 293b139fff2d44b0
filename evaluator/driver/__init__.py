"""The trusted driver: one evaluation's steps (`evaluate.py`), the cold path, the connection to each worker, warm zygotes, and the runners (threads, Ray).
"""
