"""``cardcage doctor`` and ``current_platform`` agree, over generated installations.

Hypothesis picks which fixture platform distributions are installed (healthy, declining,
raising, unimportable, a bad result, a bad class, a raising constructor, one written for SGLang,
a duplicate name, a reserved name), how the selector is spelled (empty, an installed name, a
built-in alias in any case, padded, a typo, an unknown name), the allowlist and the CPU-engine
switch. For each, two fresh interpreters see the same real distributions (``*.dist-info`` in a
temporary site on ``PYTHONPATH``, as ``cli_support.Site`` writes them): one runs
``cardcage doctor --json``, the other touches ``current_platform``. Nothing is mocked.

They must agree: doctor reports an error in the platform group exactly when ``current_platform``
raises, its first one is the error ``current_platform`` raises (same kind, same plugin), and
when selection succeeds doctor names the platform it resolves to. Bounded to a few dozen
installations (two interpreters each) by default, so it runs in well under a minute;
``CC_AGREEMENT_EXAMPLES`` raises the bound for a longer search.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cli_support import (
    DECLINING_PLATFORM,
    OOT_PLATFORM,
    RAISING_PLATFORM,
    UNIMPORTABLE_PLATFORM,
    Site,
    run_cli,
    validate,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cardcage.platforms.srt import srt_policy

PLATFORMS = "sglang.srt.platforms"

#: Returns something that is not a class name.
BAD_RESULT_PLATFORM = """
def activate():
    return 42
"""

#: Names a class that is not an SRTPlatform.
BAD_CLASS_PLATFORM = """
class {cls}:
    pass


def activate():
    return "{module}:{cls}"
"""

#: A valid class whose constructor raises.
RAISING_CONSTRUCTOR_PLATFORM = OOT_PLATFORM.replace(
    '    device_type = "{device}"\n',
    '    device_type = "{device}"\n\n'
    "    def __init__(self):\n"
    '        raise RuntimeError("no device context")\n',
)

#: A platform plugin written for SGLang's own runtime (SGLang is not installed here).
SGLANG_PLATFORM = """
from sglang.srt.platforms.interface import SRTPlatform


def activate():
    return "{module}:SRTPlatform"
"""

#: Fixture distributions: key -> (distribution, entry-point name, source).
POOL: dict[str, tuple[str, str, str]] = {
    "alpha": ("vendor-a", "alpha", OOT_PLATFORM),
    "beta": ("vendor-b", "beta", OOT_PLATFORM),
    "sleepy": ("sleepy-vendor", "sleepy", DECLINING_PLATFORM),
    "flaky": ("flaky-vendor", "flaky", RAISING_PLATFORM),
    "broken": ("broken-vendor", "broken", UNIMPORTABLE_PLATFORM),
    "badresult": ("odd-vendor", "badresult", BAD_RESULT_PLATFORM),
    "badclass": ("wrong-vendor", "badclass", BAD_CLASS_PLATFORM),
    "ctor": ("ctor-vendor", "ctor", RAISING_CONSTRUCTOR_PLATFORM),
    "native": ("sglang-vendor", "native", SGLANG_PLATFORM),
    "alpha-again": ("vendor-a-fork", "alpha", OOT_PLATFORM),  # a duplicate name
    "squatter": ("squatter", "Cuda", OOT_PLATFORM),  # a built-in alias, in another case
}

ALIASES = ("cpu", "cuda", "rocm", "xpu")

#: The finding doctor reports for each error current_platform raises, most specific first.
CODES: list[tuple[str, frozenset[str]]] = [
    ("TargetsSGLangError", frozenset({"plugin-targets-sglang"})),
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

#: Touches current_platform in a fresh interpreter; prints the class, or what it raised.
RESOLVE = """
import json
try:
    from cardcage.platforms import current_platform
except Exception as exc:
    print(json.dumps({
        "raised": [c.__name__ for c in type(exc).__mro__],
        "plugin": getattr(exc, "plugin", None),
        "message": str(exc),
    }))
else:
    cls = type(current_platform)
    print(json.dumps({"platform": f"{cls.__module__}.{cls.__qualname__}"}))
"""


def _typo(name: str) -> str:
    return name[1:] + name[0] if len(name) > 1 else name + "x"


@st.composite
def installations(draw: st.DrawFn) -> tuple[list[str], dict[str, str]]:
    """Installed fixtures, and the environment: selector, allowlist, CPU-engine switch."""
    installed = draw(st.lists(st.sampled_from(sorted(POOL)), unique=True, max_size=4))
    names = sorted({POOL[key][1] for key in installed})
    spelled = st.sampled_from([*names, *ALIASES]) if names else st.sampled_from(ALIASES)
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
    env = {"SGLANG_PLATFORM": selector} if selector else {}
    allowlist = draw(
        st.one_of(
            st.none(),
            st.just(","),
            st.lists(st.sampled_from([*names, "alpah"]), unique=True).map(",".join),
        )
    )
    if allowlist is not None:
        env["SGLANG_PLUGINS"] = allowlist
    engine = draw(st.sampled_from([None, "1", "0", "yes"]))  # "yes" does not parse
    if engine is not None:
        env["SGLANG_USE_CPU_ENGINE"] = engine
    return installed, env


def _install(root: Path, installed: list[str]) -> Site:
    site = Site(root)
    for key in installed:
        dist, ep, source = POOL[key]
        site.platform(dist, ep, source)
    return site


def _resolve(site: Site, env: dict[str, str]) -> dict[str, Any]:
    done = run_cli(site=site, env=env, command=[sys.executable, "-c", RESOLVE])
    assert done.returncode == 0, done
    resolved: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return resolved


def _builtin_platform(alias: str) -> str:
    """``module.Class`` of the SRT built-in ``alias``, from the policy the runtime uses."""
    module, _, name = srt_policy().aliases()[alias].qualname.partition(":")
    return f"{module}.{name}"


@settings(
    max_examples=int(os.environ.get("CC_AGREEMENT_EXAMPLES", "20")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=installations())
def test_doctor_and_current_platform_agree(case: tuple[list[str], dict[str, str]]) -> None:
    installed, env = case
    with tempfile.TemporaryDirectory(prefix="cc-agree-") as folder:
        site = _install(Path(folder) / "site", installed)
        with ThreadPoolExecutor(2) as pool:  # two independent interpreters, side by side
            resolving = pool.submit(_resolve, site, env)
            doctor = pool.submit(site.run, "doctor", "--json", env=env)
            resolved, document = resolving.result(), doctor.result().json()
        validate("doctor", document)

    (startup,) = [s for s in document["startup"] if s["runtime"] == "srt"]
    errors = [
        f for f in document["findings"] if f["severity"] == "error" and f["group"] == PLATFORMS
    ]
    context = f"installed={installed} env={env}\ncurrent_platform: {resolved}\ndoctor: {document}"
    if "raised" in resolved:
        assert startup["selection_fails"] is True, context
        if "InvalidEnvVarError" in resolved["raised"]:  # a probe read the variable
            codes = {f["code"] for f in document["findings"] if f["severity"] == "error"}
            assert "invalid-env-var" in codes, context
            return
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
    elif startup["builtin"] is not None:
        assert _builtin_platform(startup["builtin"]) == resolved["platform"], context
    else:  # the base class, the chain's default
        assert resolved["platform"] == "cardcage.platforms.interface.SRTPlatform", context
