"""Time the minimum detectable effect (paired/power.py) as compare and the gate compute it, and the gate's
observed failure rate at that shift (issue #46).

    python benchmarks/bench_power.py

For n in 12, 30, 50, 200 pairs and 5 tested metrics: the seconds one MDE takes (2,000 simulations, the
shipped protocol's settings), then, for n = 30, the share of 400 simulated comparisons with a planted LPIPS
loss equal to the MDE that the gate fails. Prints one line per step.
"""

from __future__ import annotations

import time

import numpy as np


def main() -> None:
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.core.stats import tie_differences, wilcoxon_test
    from pytest_pstbench.paired.power import Plan, minimum_detectable_effect

    protocol = load_protocol()
    cfg = protocol.comparison
    rng = np.random.default_rng(0)
    for n in (12, 30, 50, 200):
        residuals = rng.normal(0, 0.01, n)
        plan = Plan(False, cfg.tie("lpips"), cfg, 5)
        start = time.perf_counter()
        mde = minimum_detectable_effect(residuals, n, plan, cfg.power)
        print(f"n={n:4d}: MDE {mde:.5g} in {time.perf_counter() - start:.2f} s")
    n, sd = 30, 0.01
    plan = Plan(False, cfg.tie("lpips"), cfg, 5)
    mde = minimum_detectable_effect(rng.normal(0, sd, n), n, plan, cfg.power)
    hits = 0
    for _ in range(400):
        d = tie_differences(rng.normal(mde, sd, n), plan.threshold)
        p = wilcoxon_test(d, zero_method=cfg.zero_method, alternative=cfg.alternative, method=cfg.method).pvalue
        hits += 5 * p < cfg.alpha and np.median(d) > 0
    print(
        f"n={n}: gate failed in {hits / 400:.1%} of 400 comparisons with a planted loss equal to the MDE {mde:.5g} "
        f"(sampling noise of one pilot's sd included)"
    )


if __name__ == "__main__":
    main()
