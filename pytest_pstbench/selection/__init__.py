"""Selection tracks: a judge picks the best and the worst of 2-6 candidate images (protocol `vab`).

Modules (the paired kind has the same names for the same jobs: kind, protocol, runs, tracks, demo,
session, compare, gate, tables, paper_table): `protocol` (validation), `runs` (the run format:
per_task.csv, the run loader), `tracks` (Task model, manifests, the vab-demo track), `demo` (the
vab-demo generator), `permutations`, `answers` (export, parsing), `judges` (scoring functions),
`metrics`, `consensus`, `session` (a run's results and run files), `ask/` (asking a model: its
HTTP, pacing, budget, cache, batches, usage and cost), `run_judge`
(a run's judge as both front doors choose it: answers file, model's answers or scoring function ->
run.json's judge, run name, label), `compare` (McNemar), `gate`, `tables` (terminal tables),
`paper_table` (`pstbench table`'s builder); the command line is `pytest_pstbench.cli.vab` (`pstbench vab ...`), the
pytest face `pytest_pstbench.plugin.selection`.
`kind` is standard-library only, for the pytest plugin's cheap track check.
"""
