"""Presentation orders of a task's candidates, one per trial (protocol `trials.permutation`).

Rule `vab-toolkit`, as the official VAB evaluation toolkit is described ("Python's
`random.Random(task_id)` shuffles, redrawn until distinct from earlier trials when k > 2"). The
toolkit's code could not be read when this was written, so these details are this kit's reading of
that description (README, "Permutation rule"):

* trial 0 is the dataset order `[0, 1, ..., k-1]` and consumes no random numbers;
* one generator per task, `random.Random(seed)`, where `seed` is the task id *as stored in the
  dataset* (an int seeds differently from its string; str seeds are hashed with SHA-512 by Python,
  so the orders do not depend on PYTHONHASHSEED or the platform);
* each later trial draws `random.shuffle` of a fresh list in dataset order, continuing the same
  generator; for k >= `redraw_distinct_min_k` (3) a draw equal to the order of any earlier trial
  (trial 0 included) is discarded and drawn again; for k = 2 draws are kept as they come (only two
  orders exist, so three trials cannot all differ).

`random.shuffle` moves items by position only, so shuffling indices gives the same order as
shuffling the candidates themselves. An order maps presentation position -> dataset index:
`order[p]` is the candidate shown at position p (label A for p = 0, B for p = 1, ...).
"""

from __future__ import annotations

import random


def trial_orders(
    seed, k: int, *, trials: int = 3, redraw_distinct_min_k: int = 3, max_redraws: int = 10000
) -> list[tuple[int, ...]]:
    """The presentation order of each trial for a task of `k` candidates seeded with `seed`."""
    if k < 1:
        raise ValueError("k must be positive")
    identity = tuple(range(k))
    orders = [identity]
    rng = random.Random(seed)
    for _trial in range(1, trials):
        for _attempt in range(max_redraws):
            order = list(identity)
            rng.shuffle(order)
            drawn = tuple(order)
            if k < redraw_distinct_min_k or drawn not in orders:
                break
        else:  # pragma: no cover - needs more trials than k! orders
            raise ValueError(f"no distinct order found for k={k} after {max_redraws} draws")
        orders.append(drawn)
    return orders[:trials]


def orders_for(task, params) -> list[tuple[int, ...]]:
    """Orders for a `Task` under a selection protocol (`SelectionParams`)."""
    perm = params.permutation
    return trial_orders(
        task.seed,
        task.k,
        trials=params.trials,
        redraw_distinct_min_k=int(perm["redraw_distinct_min_k"]),
        max_redraws=int(perm["max_redraws"]),
    )
