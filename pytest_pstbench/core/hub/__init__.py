"""The Hugging Face Hub's bounded client, in one package: the client every Hub call goes through (`client`:
endpoint, timeouts, offline mode, the token kept out of messages, the one retry loop, the one error map and
the one download), its limits (`limits`: bytes, entries and deadlines), network failures named (`network`),
the endpoint and token (`endpoint`), the one tree listing (`listing`), the digest check of a downloaded file
(`digests`) and the URI form of a published run (`uri`). Datasets (`pytest_pstbench.data`) and the run
store's Hub backend (`core.store.published`) reach the Hub only through it.
"""
