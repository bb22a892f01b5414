"""conftest.py of a method repository: generate outputs, score them with pytest-pstbench, gate on a baseline.

Run locally:
    pytest --pstbench-track demo                    # scores in-process via test_method.py
CI (see .github/workflows/pstbench.yml) adds the gate against the committed baseline run:
    pytest --pstbench-track demo --pstbench-name candidate --pstbench-baseline baseline/demo/reinhard
"""
