"""The run store: one interface for every command that takes a run (`backends`: a run address - a local
folder or `hf://datasets/...` - answered by the backend its form chooses: read, pull, push, versions), the
one validating reader (`reader`), run folders written whole and read back (`folder`), a run's versions over
time (`versions`: git commits, runs in order), the Hub backend (`published`: pull, push, the pull cache,
commits, the published-run checks, through `core.hub`), and the rules of a run's name (`names`)."""
