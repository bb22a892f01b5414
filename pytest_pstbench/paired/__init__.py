"""The paired track kind (photorealistic style transfer): tracks and pairs, the protocol's image I/O
rules and evaluation resolution, the scoring session, paired comparison (Wilcoxon + Holm), reference
baselines, evaluation variants and the sensitivity engine. Its pytest face is
`pytest_pstbench.plugin.paired`."""
