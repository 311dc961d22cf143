"""``cardcage doctor`` and the diffusion ``current_platform`` agree, over generated installations.

The diffusion runtime selects with the same engine as SRT (``cardcage.platforms.selection``),
with its own policy: the override ``SGLANG_DIFFUSION_PLATFORM_OVERRIDE`` selects a built-in
without probing, ``xpu`` is detected automatically only, the allowlist does not filter automatic
discovery, and ``cpu`` always matches. Hypothesis picks which fixture diffusion platforms are
installed (healthy, declining, raising, a bad result, a bad class, a duplicate name, a reserved
name), how the override is spelled (empty, an installed name, a built-in alias in any case,
padded, a typo, an unknown name) and the allowlist. For each, two fresh interpreters see the same
real distributions (``*.dist-info`` written by ``cardcage.hooks.testing.write_distribution`` into
a temporary site on ``PYTHONPATH``): one runs ``cardcage doctor --json``, the other resolves the
diffusion ``current_platform``. Nothing is mocked.

They must agree: doctor reports an error in the diffusion platform group exactly when the
diffusion ``current_platform`` raises, its first one is the error raised (same kind, same plugin),
and when selection succeeds doctor names the platform it resolves to.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cardcage.diffusion.runtime.platforms.policy import diffusion_policy
from cardcage.hooks.testing import write_distribution
from cardcage.platforms.diagnostics import load_schema

PLATFORMS = "sglang.multimodal_gen.platforms"
OVERRIDE = "SGLANG_DIFFUSION_PLATFORM_OVERRIDE"

VALID = """
from cardcage.diffusion.runtime.platforms import Platform, PlatformEnum


class VendorPlatform(Platform):
    _enum = PlatformEnum.OOT
    device_name = "@EP@"
    device_type = "@EP@"
    dispatch_key = "PrivateUse1"


def activate():
    return "@MODULE@:VendorPlatform"
"""

DECLINING = """
def activate():
    return None
"""

RAISING = """
def activate():
    raise RuntimeError("driver exploded")
"""

BAD_RESULT = """
def activate():
    return 42
"""

BAD_CLASS = """
class NotAPlatform:
    pass


def activate():
    return "@MODULE@:NotAPlatform"
"""

#: Fixture distributions: key -> (distribution, entry-point name, source).
POOL: dict[str, tuple[str, str, str]] = {
    "alpha": ("vendor-a", "alpha", VALID),
    "beta": ("vendor-b", "beta", VALID),
    "sleepy": ("sleepy-vendor", "sleepy", DECLINING),
    "flaky": ("flaky-vendor", "flaky", RAISING),
    "badresult": ("odd-vendor", "badresult", BAD_RESULT),
    "badclass": ("wrong-vendor", "badclass", BAD_CLASS),
    "alpha-again": ("vendor-a-fork", "alpha", VALID),  # a duplicate name
    "squatter": ("squatter", "Mps", VALID),  # a built-in alias, in another case
}

ALIASES = ("mps", "xpu", "rocm", "cuda", "npu", "musa", "cpu")

#: The finding doctor reports for each error current_platform raises, most specific first.
CODES: list[tuple[str, frozenset[str]]] = [
    ("DuplicatePluginError", frozenset({"duplicate-entry-point"})),
    ("ReservedPlatformNameError", frozenset({"reserved-platform-name"})),
    ("PlatformNotFoundError", frozenset({"unknown-platform-selector"})),
    ("MultiplePlatformsError", frozenset({"multiple-platforms"})),
    ("InvalidActivateResultError", frozenset({"platform-activation-invalid"})),
    ("InvalidPlatformClassError", frozenset({"invalid-platform-class"})),
    ("PlatformUnavailableError", frozenset({"selected-platform-unavailable"})),
    (
        "PlatformActivationError",
        frozenset(
            {"platform-import-failed", "platform-activation-failed", "platform-construction-failed"}
        ),
    ),
]

RESOLVE = """
import json
try:
    from cardcage.diffusion.runtime.platforms.current import get_current_platform

    platform = get_current_platform()
except Exception as exc:
    print(json.dumps({
        "raised": [c.__name__ for c in type(exc).__mro__],
        "plugin": getattr(exc, "plugin", None),
        "message": str(exc),
    }))
else:
    cls = type(platform)
    print(json.dumps({"platform": f"{cls.__module__}.{cls.__qualname__}"}))
"""


def _typo(name: str) -> str:
    return name[1:] + name[0] if len(name) > 1 else name + "x"


@st.composite
def installations(draw: st.DrawFn) -> tuple[list[str], dict[str, str]]:
    """Installed fixtures, and the environment: the override and the allowlist."""
    installed = draw(st.lists(st.sampled_from(sorted(POOL)), unique=True, max_size=4))
    names = sorted({POOL[key][1] for key in installed})
    spelled = st.sampled_from([*names, *ALIASES])
    selector = draw(
        st.one_of(
            st.just(""),
            spelled,
            spelled.map(str.upper),
            spelled.map(str.title),
            spelled.map(lambda s: f"  {s} "),
            spelled.map(_typo),
            st.just("gaudi"),
        )
    )
    env = {OVERRIDE: selector} if selector else {}
    allowlist = draw(
        st.one_of(
            st.none(),
            st.just(","),
            st.lists(st.sampled_from([*names, "alpah"]), unique=True).map(",".join),
        )
    )
    if allowlist is not None:
        env["SGLANG_PLUGINS"] = allowlist
    return installed, env


def _install(site: Path, installed: list[str]) -> None:
    site.mkdir()
    for key in installed:
        dist, ep, source = POOL[key]
        module = f"ccagree_{key.replace('-', '_')}"
        write_distribution(
            site,
            dist,
            version="1.0",
            entry_points={PLATFORMS: {ep: f"{module}:activate"}},
            modules={module: source.replace("@MODULE@", module).replace("@EP@", ep)},
        )


def _python(site: Path, env: dict[str, str], *args: str) -> str:
    """Run ``python *args`` in a fresh interpreter that sees only ``site``'s fixtures."""
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SGLANG_", "CARDCAGE_")) and k != "PYTHONPATH"
    }
    environ.update(PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1", **env)
    done = subprocess.run(
        [sys.executable, *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{args}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _builtin_platform(alias: str) -> str:
    """``module.Class`` of the diffusion built-in ``alias``, from the runtime's own policy."""
    module, _, name = diffusion_policy().aliases()[alias].qualname.partition(":")
    return f"{module}.{name}"


@settings(
    max_examples=int(os.environ.get("CC_AGREEMENT_EXAMPLES", "20")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=installations())
def test_doctor_and_the_diffusion_current_platform_agree(
    case: tuple[list[str], dict[str, str]],
) -> None:
    installed, env = case
    with tempfile.TemporaryDirectory(prefix="cc-agree-") as folder:
        site = Path(folder) / "site"
        _install(site, installed)
        with ThreadPoolExecutor(2) as pool:  # two independent interpreters, side by side
            resolving = pool.submit(_python, site, env, "-c", RESOLVE)
            doctoring = pool.submit(
                _python, site, env, "-m", "cardcage.platforms.cli", "doctor", "--json"
            )
            resolved = json.loads(resolving.result().strip().splitlines()[-1])
            document = json.loads(doctoring.result())
    jsonschema.Draft202012Validator(load_schema("doctor")).validate(document)

    (startup,) = [s for s in document["startup"] if s["runtime"] == "diffusion"]
    errors = [
        f for f in document["findings"] if f["severity"] == "error" and f["group"] == PLATFORMS
    ]
    context = f"installed={installed} env={env}\ncurrent_platform: {resolved}\ndoctor: {document}"
    if "raised" in resolved:
        assert startup["selection_fails"] is True, context
        first = errors[0]
        expected = next(codes for name, codes in CODES if name in resolved["raised"])
        assert first["code"] in expected, context
        assert first["plugin"] == resolved["plugin"], context
        return
    assert startup["selection_fails"] is False, context
    assert errors == [], context
    assert startup["known"] is True, context
    if startup["platform"] is not None:
        assert startup["platform"]["qualname"] == resolved["platform"], context
    else:  # diffusion always ends on a built-in: the override's, or the chain's (cpu matches)
        assert _builtin_platform(startup["builtin"]) == resolved["platform"], context
