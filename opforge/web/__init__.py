"""`opforge serve`: a dashboard and an HTTP API over the store (FastAPI; pages rendered server-side by Jinja2).

    app.py          create_app(store, token): the app, its errors (one sentence each) and the request size limit
    pages.py        the queue with its submit form, jobs, runs, a run, a candidate, the leaderboard (no script)
    api.py          /api: submit a task file, jobs, runs, best kernels, candidates, leaderboard, package downloads
    submission.py   uploads checked and queued exactly as `opforge submit` queues them
    auth.py         writes need $OPFORGE_TOKEN; reads are open
    views.py        what the store says, shaped for pages and JSON
    downloads.py    exported packages as zip files
"""

from opforge.web.app import create_app

__all__ = ["create_app"]
