"""`pstbench vab consensus --alpha`: the majority's closed form, bounded time and progress for large
panels.

Found by issue #11 (a number the kit prints is right or absent): each test reproduces one case of the issue
(its number in the test's docstring) and checks the fixed behaviour."""

from __future__ import annotations

from pytest_pstbench.cli import main as cli_main


def test_the_majority_closed_form_matches_inclusion_exclusion():
    """Issue #11 case 17."""
    from fractions import Fraction

    from pytest_pstbench.selection import null_model

    for k in range(2, 7):
        for n in range(1, 13):
            for m in range(n // 2 + 1, n + 1):
                if 2 * m <= n:
                    continue
                p_a = Fraction(null_model.bounded_words(n, [m] * k), k**n)
                p_ab = Fraction(null_model._count_none_pass(k, n, m), (k * (k - 1)) ** n)
                assert null_model.null_pass_probability(k, n, m) == 1 - 2 * p_a + p_ab, (k, n, m)


def test_alpha_with_k6_and_80_judges_is_bounded_and_shows_progress(tmp_path, capsys):
    """Issue #11 case 17."""
    import time

    rows = ["task_id,k,judge,best,worst"]
    rows += [f"t,6,j{i},{'abcdef'[i % 6]},{'abcdef'[(i + 1) % 6]}" for i in range(80)]
    votes = tmp_path / "votes.csv"
    votes.write_text("\n".join(rows) + "\n")
    start = time.monotonic()
    assert cli_main(["vab", "consensus", str(votes), "--alpha", "0.05"]) == 0
    took = time.monotonic() - start
    out, err = capsys.readouterr()
    assert took < 90, took
    # the exact values (computed once with the inclusion-exclusion sum, ~50 s): p(20) = 0.0501316..., p(21) = 0.0154719...
    line = next(l for l in out.splitlines() if l.lstrip().startswith("6 "))
    cells = line.split()
    assert cells[:3] == ["6", "80", "21"]
    lo, hi = (float(x) for x in line.split("[")[1].split("]")[0].split(","))
    assert lo <= 0.015471929166185826 <= hi
    assert "Monte Carlo, 200000 draws; 0.95 Clopper-Pearson" in line
    assert "consensus: k=6 n=80: the exact sum is too large beyond m=10; drawing 200000 Monte Carlo samples" in err
    assert "consensus: k=6 n=80 m=20: Monte Carlo " in err
