"""Errors of ``cardcage new``: a name or a destination the scaffold cannot use.

Both derive from ``cardcage.hooks.errors.PluginError`` (so they carry the plugin's entry-point
name and distribution when those are known) and from the builtin a caller would expect:
``ValueError`` for a bad name, ``FileExistsError`` for a destination that already holds files,
``NotADirectoryError`` for a destination that is (or lies under) a file.
Each message names the value, the rule it breaks and the flag that fixes it.
"""

from __future__ import annotations

from cardcage.hooks.errors import PluginError

__all__ = [
    "DestinationNotAFolderError",
    "DestinationNotEmptyError",
    "InvalidPluginNameError",
    "ScaffoldError",
]


class ScaffoldError(PluginError):
    """Base of every error ``cardcage new`` raises before it writes a file."""


class InvalidPluginNameError(ScaffoldError, ValueError):
    """A name the generated plugin would carry breaks the rule of where it is used.

    ``field`` is what the name is for ("distribution", "import package", ...), ``flag`` the
    option that sets it, ``suggestion`` a valid spelling close to ``value`` (or None).
    """

    def __init__(
        self,
        field: str,
        value: str,
        rule: str,
        *,
        flag: str,
        suggestion: str | None = None,
        plugin: str | None = None,
        distribution: str | None = None,
    ) -> None:
        self.field = field
        self.value = value
        self.flag = flag
        self.suggestion = suggestion
        hint = f" Did you mean {suggestion!r}?" if suggestion else ""
        fix = f"{flag} {suggestion}" if suggestion else f"{flag} <a valid {field}>"
        who = _who(plugin, distribution)
        super().__init__(
            f"{value!r} is not a valid {field}{who}: {rule}.{hint} Fix: pass {fix}.",
            plugin=plugin,
            distribution=distribution,
        )


class DestinationNotEmptyError(ScaffoldError, FileExistsError):
    """The destination folder exists and holds files: ``cardcage new`` never mixes a new plugin
    into them unless told to (``--force``)."""

    def __init__(self, destination: str, entries: list[str], *, distribution: str) -> None:
        self.destination = destination
        self.entries = tuple(entries)
        shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
        super().__init__(
            f"{destination} already exists and is not empty ({shown}), so the plugin "
            f"{distribution} was not written there. Fix: choose a new folder, or pass --force "
            "to write the plugin's files into it (files of the same name are replaced, others "
            "are kept).",
            distribution=distribution,
        )


class DestinationNotAFolderError(ScaffoldError, NotADirectoryError):
    """The destination, or a folder above it, is a file: no plugin can be written there, with
    ``--force`` or without (``--force`` writes into a folder, it never replaces a file)."""

    def __init__(self, destination: str, blocker: str, *, distribution: str) -> None:
        self.destination = destination
        self.blocker = blocker
        where = "is a file" if blocker == destination else f"lies under the file {blocker}"
        super().__init__(
            f"{destination} {where}, so the plugin {distribution} was not written there. "
            "Fix: choose a folder path for the new plugin (it is created if it does not exist).",
            distribution=distribution,
        )


def _who(plugin: str | None, distribution: str | None) -> str:
    if plugin and distribution:
        return f" for plugin {plugin!r} (distribution {distribution})"
    if distribution:
        return f" for distribution {distribution}"
    return ""
