"""Candidates' sources to libraries: the trusted builder (compilers only, in a sandbox), the build caches, the build stage that serves a worker's build requests, and the native `load_c` builds.
"""
