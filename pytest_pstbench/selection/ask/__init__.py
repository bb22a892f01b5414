"""Asking a model (`pstbench vab run|export`, the plugin's `--pstbench-model`): every module of the selection kind
that talks to a model endpoint or manages that talk, and nothing else of the kind does HTTP.

- `settings`: a model run's settings, declared once: `ModelOptions` (the options as the front doors take them, with
  `vab run`'s defaults) checked into `RunSettings` by `run_settings`; recorded command lines with `--header` values
  redacted.
- `model_run`: `ask_model`, the one entry point (`vab run`, `vab run --batch`, the plugin's --pstbench-model), and the
  run loop (`run_model`): the requests not yet answered, asked on threads, each answer appended.
- `requests`, `message`: which requests a track asks and the exact body each sends (the official layout).
- `chat_api`: one bounded HTTP call to a chat-completions endpoint and its retries (`call`, `post`).
- `attempts`: one request's attempts, one rule for every path (what a line records, whether to ask again).
- `pacing`: `--concurrency auto`'s adaptive limit. `budget`: `--budget-tokens|--budget-cost`.
  `response_cache`: answers kept across runs. `estimate`: `--estimate [--calibrate N]`.
- `batch_run`, `batch_http`, `batch_file`: `--batch` through an OpenAI-compatible Batch API (its rounds, its
  bounded HTTP calls, its input and output files).
- `usage`, `pricing`: the tokens a reply says it cost, and that usage at a price table.
- `export`: `vab export`, what a model must answer written as a folder.
"""
