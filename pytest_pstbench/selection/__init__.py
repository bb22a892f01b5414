"""Selection tracks: a judge picks the best and the worst of 2-6 candidate images (protocol `vab`).

Modules: `protocol` (validation), `tasks` (Task model, manifests, the vab-demo track),
`permutations`, `answers` (export, parsing), `judges` (scoring functions), `metrics`,
`consensus`, `session` (run files), `client` (model API), `run_judge` (a run's judge as both front
doors choose it: answers file, model's answers or scoring function -> run.json's judge, run name,
label), `compare` (McNemar); the command line is `pytest_pstbench.cli.vab` (`pstbench vab ...`), the
pytest face `pytest_pstbench.plugin.selection`.
`kind` is standard-library only, for the pytest plugin's cheap track check.
"""
