"""Atomic file writes and netCDF output with provenance.

A write goes to a temporary file in the destination folder and is moved into
place with :func:`os.replace`, which is atomic on POSIX: a run killed at any
moment leaves either the old file or the new one, never a torn one.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import subprocess
import tempfile
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path next to ``path``; move it onto ``path`` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    # mkstemp creates the file readable by its owner only; give it the permissions of an
    # ordinary new file (results are meant to be shared and committed).
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def git_commit() -> str:
    """The current git commit of the source tree, or ``"unknown"`` outside git."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=5, check=True)
        commit = out.stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=here, capture_output=True, text=True, timeout=5).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def provenance() -> dict[str, str]:
    """Attributes recorded in every saved result: package version, commit, date."""
    from . import __version__

    return {
        "package_version": __version__,
        "git_commit": git_commit(),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def _netcdf_safe_attrs(attrs: dict) -> dict:
    """netCDF attributes must be str, numbers or 1-d arrays; None and bool become str."""
    safe = {}
    for key, value in attrs.items():
        if value is None or isinstance(value, bool):
            safe[key] = str(value)
        elif isinstance(value, (list, tuple)):
            safe[key] = str(list(value)) if any(isinstance(v, str) for v in value) else list(value)
        elif isinstance(value, dict):
            safe[key] = repr(value)
        else:
            safe[key] = value
    return safe


def write_netcdf(ds, path) -> Path:
    """Write ``ds`` to ``path`` atomically, adding provenance attributes."""
    path = Path(path)
    ds = ds.copy()
    ds.attrs = _netcdf_safe_attrs({**ds.attrs, **{k: v for k, v in provenance().items()
                                                  if k not in ds.attrs}})
    for name in ds.variables:
        ds[name].attrs = _netcdf_safe_attrs(ds[name].attrs)
    with atomic_path(path) as tmp:
        ds.to_netcdf(tmp)
    return path
