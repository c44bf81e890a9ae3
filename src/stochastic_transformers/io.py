"""Atomic file writes and netCDF output with provenance.

A write goes to a temporary file in the destination folder and is moved into
place with :func:`os.replace`, which is atomic on POSIX: a run killed at any
moment leaves either the old file or the new one, never a torn one.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import platform
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


def writable_folder(path, name: str) -> Path:
    """Create the folder ``path`` if needed and check that a file can be written in it;
    return it, or raise a ValueError naming the option ``name`` (``--out``, ``cache_dir``).

    Called before any compute, so that a run never computes for hours and then fails to
    write: an existing file in the way, a parent that is a file, a folder without write
    permission are refused in one line.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{name} {str(path)!r} is an existing file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        # A probe file, not os.access: ACLs, read-only mounts and root all answer truly.
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise ValueError(f"{name} {str(path)!r} is not a writable folder ({reason})") from None
    return path


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


def cpu_model() -> str:
    """The processor's name: ``model name`` of ``/proc/cpuinfo`` where there is one (Linux),
    else :func:`platform.processor`, else ``"unknown"``."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                    return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average() -> list[float] | None:
    """The system's load average over 1, 5 and 15 minutes (:func:`os.getloadavg`), or None
    where the system does not report it."""
    try:
        return [round(float(x), 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def machine() -> dict:
    """The machine a result is computed on: ``machine_cpu`` (:func:`cpu_model`) and
    ``machine_cores`` (logical cores, :func:`os.cpu_count`; 0 where unknown)."""
    return {"machine_cpu": cpu_model(), "machine_cores": int(os.cpu_count() or 0)}


def provenance(load_start=None) -> dict:
    """Attributes recorded in every saved result: package version, commit, date, machine.

    ``created`` is the time of the call (UTC).  ``machine_cpu`` and ``machine_cores`` name
    the machine (:func:`machine`); ``load_average_end`` is the load average (1, 5 and 15
    minutes) at the call and ``load_average_start`` is ``load_start``, the one a caller
    took when its run began (:func:`load_average`); each is left out where it is not known.
    Results written before the machine was recorded lack these four attributes: read a
    missing one as unknown.
    """
    from . import __version__

    out = {
        "package_version": __version__,
        "git_commit": git_commit(),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        **machine(),
    }
    if load_start is not None:
        out["load_average_start"] = [float(x) for x in load_start]
    end = load_average()
    if end is not None:
        out["load_average_end"] = end
    return out


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
    """Write ``ds`` to ``path`` atomically, adding the :func:`provenance` attributes it
    lacks (those a sweep recorded when it ran, its load averages included, are kept)."""
    path = Path(path)
    ds = ds.copy()
    ds.attrs = _netcdf_safe_attrs({**ds.attrs, **{k: v for k, v in provenance().items()
                                                  if k not in ds.attrs}})
    for name in ds.variables:
        ds[name].attrs = _netcdf_safe_attrs(ds[name].attrs)
    with atomic_path(path) as tmp:
        ds.to_netcdf(tmp)
    return path


def write_json(obj, path) -> Path:
    """Write ``obj`` as indented JSON to ``path`` atomically (numpy scalars become numbers)."""
    import json

    def default(value):
        if hasattr(value, "item"):          # numpy scalars
            return value.item()
        if hasattr(value, "tolist"):        # numpy arrays
            return value.tolist()
        raise TypeError(f"not JSON serialisable: {type(value).__name__}")

    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=1, default=default, allow_nan=True) + "\n")
    return path


def update_attrs(path, attrs: dict, note: str) -> Path:
    """Change global attributes of the netCDF file ``path`` in place, atomically, leaving
    its variables untouched.

    The file is copied next to itself, the copy's attributes are set (``attrs``, netCDF-safe
    as in :func:`write_netcdf`) and ``note`` is appended to its ``attrs_corrected`` attribute
    (earlier notes kept, separated by ``" | "``), then the copy replaces the file.
    """
    import shutil

    import netCDF4

    path = Path(path)
    with atomic_path(path) as tmp:
        shutil.copyfile(path, tmp)
        with netCDF4.Dataset(tmp, "r+") as nc:
            old = nc.getncattr("attrs_corrected") if "attrs_corrected" in nc.ncattrs() else ""
            for key, value in _netcdf_safe_attrs(dict(attrs)).items():
                nc.setncattr(key, value)
            nc.setncattr("attrs_corrected", f"{old} | {note}" if old else note)
    return path
