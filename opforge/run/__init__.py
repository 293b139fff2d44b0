"""Running a search for one task: what a run is made of and the loop that drives it.

    plan.py         a run's task, seed kernel, budget and evaluation settings, checked before anything is stored
    search.py       the run loop (propose, record, evaluate, record, select) and its budget
    population.py   members, islands and the MAP-Elites grid rebuilt from the store
    strategy.py     which parents to ask children of (ask/tell)
    proposals.py    proposals on a thread of their own
    proposers.py    the tuner or the LLM coder and judge, built from a run's configuration
    archive.py      earlier runs' kernels offered to a new run
    job_worker.py   `opforge worker`: claims queued jobs and drives their runs
    bench.py        one agent over a suite of tasks
    progress.py     the live progress line

Nothing here imports the CLI, the web app or the reports (tests/test_layering.py).
"""
