"""The requests of a model run, built one way: which (task, trial, order, prompt type) a track asks, and the
exact chat-completions body each one sends (`request_body`). `pstbench vab run` posts these bodies; anything
else that needs a request as the model sees it (a batch file, a cache key, an estimate of its size) builds it here.

A body is one user message in the official layout (`message.message_content`: the header text, then per image
a text part "\\nImage X:" and the image as a `data:image/jpeg;base64` URL of the protocol's re-encoding), with
the run's model, temperature and max_tokens and its `--extra-body` fields. `ImageURLs` encodes each image
once per run (thread-safe).
"""

from __future__ import annotations

import base64
import json
import threading
from pathlib import Path

from pytest_pstbench.selection.ask.message import encode_image, message_content
from pytest_pstbench.selection.permutations import orders_for


def requests_of(track, params):
    """(task, trial, order, prompt type) of every request the track asks, in the track's order."""
    for task in track.tasks:
        for t, order in enumerate(orders_for(task, params)):
            for ptype in params.prompt_types_for(task.k):
                yield task, t, order, ptype


class ImageURLs:
    """Each image's data URL, encoded once (the protocol's `message.image` re-encoding, or its bytes as they are)."""

    def __init__(self, params):
        self._spec = (params.message or {}).get("image")
        self._cache: dict = {}
        self._lock = threading.Lock()

    def __call__(self, src: Path) -> str:
        with self._lock:
            if src in self._cache:
                return self._cache[src]
        data, _suffix = encode_image(src, self._spec)
        mime = "image/jpeg" if self._spec else "application/octet-stream"
        url = f"data:{mime};base64," + base64.b64encode(data).decode("ascii")
        with self._lock:
            self._cache[src] = url
        return url


def request_body(settings, params, task, order, ptype, urls: ImageURLs) -> bytes:
    """The JSON body one request sends (UTF-8): the message as the official toolkit builds it, then the
    run's sampling and extra body fields."""
    labels = params.labels[: task.k]
    paths = [task.candidates[i] for i in order]
    content = []
    for part in message_content(params, ptype, labels, [str(p) for p in paths]):
        if part["type"] == "image":
            content.append({"type": "image_url", "image_url": {"url": urls(Path(part["path"]))}})
        else:
            content.append(part)
    request = {
        "model": settings.model,
        "messages": [{"role": "user", "content": content}],
        "temperature": settings.temperature,
        "max_tokens": settings.max_tokens,
    }
    request.update(dict(settings.extra_body))
    return json.dumps(request).encode("utf-8")
