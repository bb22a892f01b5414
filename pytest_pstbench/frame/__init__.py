"""The frame: the kind-neutral base of both front doors, below the kinds, which extend it.

`pytest_run` is the track-run frame of the pytest face (`TrackRun`: collection, results from xdist workers,
finishing, the gate, the terminal summary), each kind's pytest run subclassing it; `config` the option readers
of every kind's pytest run (paths, the track, baselines, bounds, the recorded command); `verdict` what a finished
session reports beyond its tables (the gate's basis, the Markdown summary, JUnit properties); `parsing` the
`pstbench` argument parser (one-line usage errors, typo suggestions) and its value types, which each kind's
commands use.

Imports core, data (the remote tracks' ids) and the option table; names no kind. Standard library and pytest at
module level (the pytest plugin loads it when a track is given).
"""
