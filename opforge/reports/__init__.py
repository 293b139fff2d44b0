"""What a run or a suite's benchmark came to: `run_summary.py` (what `opforge show` prints), `html.py` (`opforge
report`: HTML with CSV and JSON), `svg_plots.py`, and `leaderboard.py`."""
