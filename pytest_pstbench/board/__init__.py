"""`pstbench board`: a static leaderboard site (one index.html per track, board.json and board.csv with the same
numbers) from run folders, results folders and published run paths, read through the run store (core/store/).

collect.py finds and validates the runs (a run that fails is left out with its reason), ranks.py gives each method
the rank its kind's own paired test supports (1 + the methods significantly better, Holm over the board's tests),
page.py writes the site. A kind is reached only through the kind registry (core/kinds.py).
"""
