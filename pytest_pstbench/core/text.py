"""Text that pstbench did not write itself (a published run's names and fields, a manifest, a model's or a
server's reply, an error message quoting them) made safe for where it is shown: one home for every escaper.

- `for_terminal`: control characters (C0 but newline and tab, DEL, C1), bidirectional overrides and lone
  surrogates shown as visible escapes (`\\x1b`, `\\u202e`): an ESC sequence cannot set a window title, clear
  the screen or hide text, a right-to-left override cannot reorder a line. `TerminalStream` applies it to
  every write of a stream (`pstbench`'s stdout and stderr); `raw` is the stream under it (progress bars);
  the pytest terminal summary's lines pass through `TerminalLines`.
- `md_escape`, `tex_escape`, `html_escape`: a string as Markdown (GitHub's: pipe tables, inline HTML, math),
  LaTeX (pdflatex) and HTML text or attribute value; each shows control characters as `for_terminal` does.
- `redact`: secrets (an API key, a header's value, a token) removed from a text, in the spellings a
  server's reply may carry them back in (as sent, JSON-escaped, percent-encoded).

Normal text (printable, no markup characters) comes out of each unchanged. Standard library only.
"""

from __future__ import annotations

import html
import json
from urllib.parse import quote

_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))


def _escape(cp: int) -> str:
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}"


_TERMINAL = {cp: _escape(cp) for cp in (*range(0x20), *range(0x7F, 0xA0), *_BIDI) if cp not in (0x0A, 0x09)}


def for_terminal(text) -> str:
    """`text` with every control character but newline and tab, every bidirectional override / isolate mark
    and every lone surrogate shown as an escape (`\\x1b`, `\\x9b`, `\\u202e`, `\\udcff`). Backslashes are
    left as they are, so escaping twice changes nothing."""
    s = str(text).translate(_TERMINAL)
    if any("\ud800" <= ch <= "\udfff" for ch in s):
        s = "".join(_escape(ord(ch)) if "\ud800" <= ch <= "\udfff" else ch for ch in s)
    return s


def one_line(text) -> str:
    """`for_terminal` with newlines and tabs shown escaped too: a text that must stay on its line."""
    return for_terminal(text).replace("\n", "\\n").replace("\t", "\\t")


class TerminalStream:
    """A text stream whose writes pass through `for_terminal`; every other attribute is the stream's own.
    `raw` is the stream under it (for a progress bar's own carriage returns)."""

    def __init__(self, stream):
        self.raw = stream

    def write(self, s):
        return self.raw.write(for_terminal(s))

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        return getattr(self.raw, name)


def raw(stream):
    """The stream under a `TerminalStream` (else `stream` itself)."""
    return stream.raw if isinstance(stream, TerminalStream) else stream


class TerminalLines:
    """pytest's terminal reporter whose `write_line` shows each line through `for_terminal` (the pytest
    terminal summary of a track run); every other attribute is the reporter's own."""

    def __init__(self, reporter):
        self._tr = reporter

    def write_line(self, line, **markup):
        self._tr.write_line(for_terminal(line), **markup)

    def __getattr__(self, name):
        return getattr(self._tr, name)


# ---- Markdown ------------------------------------------------------------------------------------
_MD_SPECIAL = "\\`*_[]|#$~"
_MD = {"<": "&lt;", ">": "&gt;", "&": "&amp;", "\n": " ", "\t": " ", **{c: "\\" + c for c in _MD_SPECIAL}}
_MD_TABLE = str.maketrans(_MD)


def md_escape(text) -> str:
    """`text` as GitHub Markdown shows it literally, in running text or a pipe table's cell: `\\ ` * _ [ ] | # $ ~`
    backslash-escaped, `< > &` as entities (no inline HTML, no entity of the text's own), a newline or tab a
    space (a cell stays on its row), control characters as `for_terminal` shows them."""
    return for_terminal(text).translate(_MD_TABLE)


def md_code(text) -> str:
    """`text` as a Markdown code span: backticks around it, as many as it needs (CommonMark), padded with
    spaces where it starts or ends with a backtick; one line, control characters as `for_terminal` shows them."""
    s = one_line(text)
    run = longest = 0
    for ch in s:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def cell(text, tablefmt: str) -> str:
    """A table cell that a run or a server wrote (a run's name, a cell's group): `md_escape`d in a Markdown
    table (tabulate's "github"); as it is in any other (a terminal's stream shows it through `for_terminal`)."""
    return md_escape(text) if tablefmt == "github" else text


# ---- LaTeX ---------------------------------------------------------------------------------------
_TEX_MAP = {
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "\\": r"\textbackslash{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    "±": r"$\pm$",
    "↑": r"$\uparrow$",
    "↓": r"$\downarrow$",
    "†": r"$^{\dagger}$",
    "Δ": r"$\Delta$",
    "α": r"$\alpha$",
    "β": r"$\beta$",
    "γ": r"$\gamma$",
    "δ": r"$\delta$",
    "τ": r"$\tau$",
    "µ": r"$\mu$",
    "μ": r"$\mu$",
    "–": "--",
    "—": "---",
    "−": "-",
    "×": r"$\times$",
    "°": r"\textdegree{}",
}


class NoTexSpelling(ValueError):
    """A character `tex_escape` cannot write for pdflatex; its message is the one-line error (the caller
    raises it as a UserError)."""


def tex_escape(text) -> str:
    """Every LaTeX special character escaped (& % $ # _ { } ~ ^ \\ < > |), a control character a space, and
    the few non-ASCII symbols of labels written as math; any other non-ASCII character is refused (pdflatex
    could not set it: `NoTexSpelling`)."""
    out = []
    for ch in str(text):
        if ch in _TEX_MAP:
            out.append(_TEX_MAP[ch])
        elif ord(ch) < 128:
            out.append(ch if ch.isprintable() else " ")
        else:
            raise NoTexSpelling(
                f"{text!r}: character {ch!r} has no LaTeX spelling in pstbench table (pdflatex could "
                "not set it); fix: rename the run or the protocol label with ASCII characters, or use --format markdown"
            )
    return "".join(out)


# ---- HTML ----------------------------------------------------------------------------------------
def html_escape(value) -> str:
    """`value` as HTML text or a quoted attribute's value: & < > " ' as entities, control characters and
    bidirectional overrides as `for_terminal` shows them."""
    return html.escape(for_terminal(value), quote=True)


# ---- secrets -------------------------------------------------------------------------------------
def spellings(secret: str) -> list[str]:
    """The ways `secret` may come back in a reply: as sent, JSON-escaped (a body that echoes it in a JSON
    string, ASCII or not, up to three strings deep: an error message quoting a JSON echo), percent-encoded;
    longest first."""
    forms = {secret, quote(secret, safe=""), quote(secret)}
    for ascii_only in (True, False):
        s = secret
        for _depth in range(3):
            s = json.dumps(s, ensure_ascii=ascii_only)[1:-1]
            forms.add(s)
    return sorted(forms, key=len, reverse=True)


def redact(text, secrets, mark: str = "<redacted>") -> str:
    """`text` with every spelling (`spellings`) of each secret in `secrets` replaced by `mark`; an empty
    secret is skipped."""
    s = str(text)
    for secret in sorted({x for x in secrets if x}, key=len, reverse=True):
        for form in spellings(secret):
            if form in s:
                s = s.replace(form, mark)
    return s


def _redacted(value: str) -> str:
    return value.partition("=")[0] + "=<redacted>"


def redact_words(words, option: str = "--header", ini_key: str | None = None) -> list[str]:
    """Command-line words as run.json records them: the value of every `option` (NAME=VALUE) becomes
    NAME=<redacted>, whether given as `option VALUE`, `option=VALUE` or an abbreviation argparse accepts
    (`--head`); with `ini_key` also pytest's `-o KEY=NAME=VALUE` / `--override-ini=KEY=...` forms."""
    out: list[str] = []
    hide = hide_ini = False
    for w in map(str, words):
        name, eq, rest = w.partition("=")
        if hide:
            out.append(_redacted(w))
        elif hide_ini:
            out.append(f"{ini_key}={_redacted(rest)}" if name == ini_key and eq else w)
        elif name.startswith("--") and len(name) >= 4 and option.startswith(name):
            out.append(f"{name}={_redacted(rest)}" if eq else w)
        elif ini_key and name in ("-o", "--override-ini") and eq:  # --override-ini=KEY=NAME=VALUE
            key, eq2, value = rest.partition("=")
            out.append(f"{name}={ini_key}={_redacted(value)}" if key == ini_key and eq2 else w)
        elif ini_key and w.startswith(f"-o{ini_key}="):
            out.append(f"-o{ini_key}={_redacted(w[len(ini_key) + 3 :])}")
        else:
            out.append(w)
        hide = (
            not hide
            and not hide_ini
            and name.startswith("--")
            and len(name) >= 4
            and option.startswith(name)
            and not eq
        )
        hide_ini = bool(ini_key) and w in ("-o", "--override-ini")
    return out
