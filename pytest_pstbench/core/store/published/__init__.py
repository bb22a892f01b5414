"""The run store's Hub side, the backend of published runs (`hf://datasets/OWNER/NAME@REVISION/PATH`), reached
through `core.store.backends`: a published run pulled into the cache and checked as a run (`pull`), the
cache's layout and checks (`cache`), a local run checked and published as one commit (`push`), a run
path's commits on the Hub (`commits`) and its versions for `pstbench history` (`versions`). Every call to
the Hub goes through the bounded client, `core.hub`.
"""
