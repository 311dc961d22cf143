"""The names a generated plugin carries: derived from one another, each checked against the rule
of the place it is used.

* the distribution name goes to an index and to ``pip install``: PEP 508's name rule;
* the import package is a Python identifier, never ``cardcage`` (our namespace) nor a keyword;
* the entry-point name is what users type in ``SGLANG_PLATFORM`` and
  ``SGLANG_DIFFUSION_PLATFORM_OVERRIDE``: lower case, ``[a-z][a-z0-9_]*``, never a built-in
  platform's alias (selection refuses to start on one);
* the device name is the platform's ``device_name``, and the device type the torch device type
  its tensors live on: the same spelling rule;
* the class prefix starts the platform classes' names (``AcmeNpuSRTPlatform``).

A bad name raises ``InvalidPluginNameError`` with a valid spelling close to it, built by
repairing the value (``Acme NPU`` becomes ``acme-npu``), so the fix is one copy and paste.
"""

from __future__ import annotations

import keyword
import re

from .errors import InvalidPluginNameError

__all__ = [
    "RESERVED_ENTRY_POINT_NAMES",
    "check_class_prefix",
    "check_device_name",
    "check_distribution",
    "check_entry_point",
    "check_package",
    "class_prefix_from",
    "entry_point_from",
    "package_from",
]

# PEP 508's name rule (what PEP 503 normalises): ASCII letters and digits at both ends, ".", "_"
# and "-" inside.
_DISTRIBUTION = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
_LOWER_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_CLASS_PREFIX = re.compile(r"^[A-Z][A-Za-z0-9]*$")

#: The built-in platforms' aliases: SRT's (cpu, cuda, rocm, xpu) and the diffusion runtime's
#: (those plus mps, npu, musa). Selection refuses an entry point that uses one.
RESERVED_ENTRY_POINT_NAMES = frozenset({"cpu", "cuda", "rocm", "xpu", "mps", "npu", "musa"})
#: Distributions of cardcage itself: a vendor plugin cannot take their names.
_OURS = frozenset(
    {
        "cardcage",
        "cardcage-core-hooks",
        "cardcage-core-platforms",
        "cardcage-shm-broadcast",
        "cardcage-diffusion-runtime",
        "cardcage-demo-cpu",
        "cardcage-demo-cuda",
    }
)
# Suffixes a distribution name often carries that say nothing about the device.
_PLUGIN_WORDS = ("_plugin", "_platform", "_sglang", "_cardcage")
_PREFIX_WORDS = ("sglang_", "cardcage_", "vllm_")


def _canonical(name: str) -> str:
    """PEP 503's normalised form: lower case, runs of ``-_.`` as one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _lower_snake(value: str) -> str:
    """``value`` in lower case, every run of other characters one ``_``: ``9Acme-NPU`` ->
    ``9acme_npu``. It may still start with a digit."""
    return re.sub(r"[^0-9a-z]+", "_", value.lower()).strip("_")


def _snake(value: str) -> str:
    """A valid lower-case identifier close to ``value``, offered as a suggestion: leading digits
    are dropped (``9acme-npu`` -> ``acme_npu``), since a name that starts with a digit is no
    identifier. Empty when nothing usable is left."""
    return _lower_snake(value).lstrip("0123456789_")


def check_distribution(name: str) -> str:
    """``name`` unchanged when it is a valid distribution name a vendor may take."""
    if not _DISTRIBUTION.match(name):
        repaired = re.sub(r"[^A-Za-z0-9._-]+", "-", name.strip()).strip("-._").lower()
        raise InvalidPluginNameError(
            "distribution name",
            name,
            "a distribution name (PEP 508) has only ASCII letters, digits, '.', '_' and '-', "
            "and starts and ends with a letter or digit",
            flag="--distribution",
            suggestion=repaired or None,
        )
    if _canonical(name) in _OURS:
        raise InvalidPluginNameError(
            "distribution name",
            name,
            "it is the name of one of cardcage's own distributions",
            flag="--distribution",
            suggestion=f"acme-{_canonical(name).removeprefix('cardcage-')}-plugin",
        )
    return name


def package_from(distribution: str) -> str:
    """The import package a distribution's name suggests: ``acme-npu-plugin`` ->
    ``acme_npu_plugin``. Spelling only, never renaming: ``9acme-npu`` gives ``9acme_npu``,
    which ``check_package`` refuses with a valid spelling to pass as ``--package``, so the
    vendor chooses the package's name instead of finding an invented one in every import."""
    return _lower_snake(distribution)


def check_package(name: str, *, distribution: str, derived: bool = False) -> str:
    """``name`` unchanged when it can be the plugin's top-level import package. ``derived``:
    the user gave no ``--package`` and ``name`` was derived from the distribution's name, which
    the message says, since the user never typed it."""
    rule = None
    if not name.isidentifier() or not name.isascii():
        rule = (
            "an import package is a Python identifier: ASCII letters, digits and '_', not "
            "starting with a digit"
        )
    elif keyword.iskeyword(name):
        rule = "it is a Python keyword"
    elif name == "cardcage":
        rule = "'cardcage' is cardcage's own namespace package"
    elif name != name.lower():
        rule = "import packages are lower case (PEP 8), and the generated files assume it"
    if rule is None:
        return name
    if derived:
        rule += (
            f" (it was derived from the distribution name {distribution!r}, which can stay: "
            "--package names the import package alone)"
        )
    suggestion = _snake(name)
    if suggestion == "cardcage" or keyword.iskeyword(suggestion):
        suggestion = f"{suggestion}_plugin"
    raise InvalidPluginNameError(
        "import package",
        name,
        rule,
        flag="--package",
        suggestion=suggestion if suggestion and suggestion != name else None,
        distribution=distribution,
    )


def entry_point_from(package: str) -> str:
    """The entry-point name a package suggests, without words that do not name the device:
    ``acme_npu_plugin`` -> ``acme_npu``, ``sglang_acme`` -> ``acme``."""
    name = package
    for prefix in _PREFIX_WORDS:
        if name.startswith(prefix) and len(name) > len(prefix):
            name = name[len(prefix) :]
    for suffix in _PLUGIN_WORDS:
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return name


def _vendor_word(distribution: str) -> str:
    """What to put before a reserved name in a suggestion: the distribution's device word
    (``acme-npu-plugin`` -> ``acme_npu``), else ``vendor``."""
    word = _snake(entry_point_from(_snake(distribution)))
    return word if word and word not in RESERVED_ENTRY_POINT_NAMES else "vendor"


def _lower_name(field: str, flag: str, value: str, *, distribution: str) -> str:
    if not _LOWER_NAME.match(value):
        raise InvalidPluginNameError(
            field,
            value,
            "it must be lower case, start with a letter and hold only a-z, 0-9 and '_' "
            "(users type it in SGLANG_PLATFORM, and it names the plugin's variables)",
            flag=flag,
            suggestion=_snake(value) or None,
            distribution=distribution,
        )
    if value in RESERVED_ENTRY_POINT_NAMES:
        reserved = ", ".join(sorted(RESERVED_ENTRY_POINT_NAMES))
        raise InvalidPluginNameError(
            field,
            value,
            f"the built-in platforms' names ({reserved}) are reserved, and selection refuses "
            "to start when a plugin uses one",
            flag=flag,
            suggestion=f"{_vendor_word(distribution)}_{value}",
            distribution=distribution,
        )
    return value


def check_entry_point(name: str, *, distribution: str) -> str:
    """``name`` unchanged when it can name the plugin's entry points."""
    return _lower_name("entry-point name", "--entry-point", name, distribution=distribution)


def check_device_name(name: str, *, distribution: str, flag: str = "--device") -> str:
    """``name`` unchanged when it can be the platform's ``device_name`` (or, with
    ``flag="--device-type"``, its torch device type)."""
    field = "device type" if flag == "--device-type" else "device name"
    if flag == "--device-type":  # a torch device type may be a built-in one: "cuda", "cpu"
        if not _LOWER_NAME.match(name):
            raise InvalidPluginNameError(
                field,
                name,
                "a torch device type is lower case: a-z, 0-9 and '_', starting with a letter",
                flag=flag,
                suggestion=_snake(name) or None,
                distribution=distribution,
            )
        return name
    return _lower_name(field, flag, name, distribution=distribution)


def class_prefix_from(device: str) -> str:
    """The class-name prefix a device name suggests: ``acme_npu`` -> ``AcmeNpu``."""
    return "".join(part[:1].upper() + part[1:] for part in device.split("_") if part)


def check_class_prefix(prefix: str, *, distribution: str) -> str:
    """``prefix`` unchanged when the platform classes can start with it."""
    if not _CLASS_PREFIX.match(prefix) or keyword.iskeyword(prefix):
        raise InvalidPluginNameError(
            "class prefix",
            prefix,
            "it starts the platform classes' names: an upper-case letter, then letters and digits",
            flag="--class-prefix",
            suggestion=class_prefix_from(_snake(prefix)) or None,
            distribution=distribution,
        )
    return prefix
