"""Pages read back as a browser builds them: `chromium(*args)` runs headless Chromium (its stdout: `--dump-dom`
gives the DOM it built), `Elements` collects a document's start tags and text. Tests using them are skipped where
`HAS_CHROMIUM` is false."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser

HAS_CHROMIUM = shutil.which("chromium") is not None


class Elements(HTMLParser):
    """The start tags and the text of a document (what Chromium's --dump-dom serializes)."""

    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def chromium(*args) -> str:
    return subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", *args],
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    ).stdout
