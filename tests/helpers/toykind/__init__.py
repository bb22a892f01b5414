"""A third track kind that lives wholly here, under tests/: the proof that a kind is a package and one entry
point (tests/contract/test_third_kind.py registers it the way an installed package is registered, an entry point
of the group `pytest_pstbench.kinds` in a generated *.dist-info on sys.path, and runs it through `pytest`,
`pstbench score`, `compare`, `table`, `report` and `ls`; no file outside this package knows it).

The kind, `toy`: a track is a set of items, each with an expected whole number; a method's outputs folder holds
one `<item>.txt` per item with its answer; an item is correct (1) when the answer is the expected number, else 0.
Runs are compared with the exact sign test over the items where the two runs differ (computed here by hand, with
`math.comb`). `kind` is its registry entry (standard library only), `engine` its track, run files, comparison,
table, page and `pstbench score`, `pytest_run` its pytest face over the frame's `TrackRun`.
"""
