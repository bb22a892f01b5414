"""Reading a user-editable YAML file with a one-line error for bad syntax."""
from __future__ import annotations

from pathlib import Path

from pytest_pstbench.core.errors import UserError


def read_yaml(path: Path, what: str):
    """Parse `path`; a syntax or encoding error becomes a UserError naming the file and `what` it is."""
    import yaml

    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not a valid YAML {what} ({str(exc).splitlines()[0]}); fix the file's syntax") from None
