"""The paired track kind (photorealistic style transfer): tracks and pairs, the protocol's image I/O
rules and evaluation resolution, the scoring session, paired comparison (Wilcoxon + Holm), reference
baselines, evaluation variants and the sensitivity engine. The modules the selection kind has too carry
the same names (kind, protocol, runs, tracks, demo, session, compare, gate, tables, paper_table). Its
pytest face is `paired.pytest_run` (`PairedRun`, over the frame's `TrackRun`), its `pstbench` commands
`paired.commands` (demo, score of a paired track, baseline, sensitivity, power)."""
