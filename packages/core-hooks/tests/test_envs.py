"""Typed environment variables: strict booleans, the allowlist parser, live reads, the registry."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cardcage.hooks.envs import (
    CARDCAGE_DEFERRED_HOOKS,
    CARDCAGE_STRICT_HOOKS,
    ENV_VARS,
    SGLANG_PLATFORM,
    SGLANG_PLUGINS,
    EnvRegistry,
    EnvVar,
    parse_allowlist,
    parse_bool,
)
from cardcage.hooks.errors import CardcageError, InvalidEnvVarError
from cardcage.hooks.profile import DIFFUSION_PROFILE, SRT_PROFILE

# -- strict booleans ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1", True),
        ("true", True),
        ("TRUE", True),
        (" True\n", True),
        ("0", False),
        ("false", False),
        ("FaLsE", False),
        ("\t0 ", False),
    ],
)
def test_parse_bool_accepts_0_1_true_false_in_any_case_and_padding(
    raw: str, expected: bool
) -> None:
    assert parse_bool("MY_FLAG", raw) is expected


@pytest.mark.parametrize("raw", ["yes", "no", "on", "2", "", "  ", "truee", "1.0"])
def test_parse_bool_rejects_anything_else_naming_the_variable(raw: str) -> None:
    with pytest.raises(InvalidEnvVarError) as info:
        parse_bool("MY_FLAG", raw)

    assert (info.value.variable, info.value.value) == ("MY_FLAG", raw)
    assert str(info.value).startswith(f"MY_FLAG={raw!r} is not valid")


def test_an_invalid_boolean_is_a_value_error_and_a_cardcage_error() -> None:
    with pytest.raises(ValueError, match="MY_FLAG") as info:
        parse_bool("MY_FLAG", "yes")

    assert isinstance(info.value, CardcageError)


@pytest.mark.parametrize("var", [CARDCAGE_STRICT_HOOKS, CARDCAGE_DEFERRED_HOOKS])
def test_boolean_variables_default_to_false_when_unset(
    var: EnvVar[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(var.name, raising=False)

    assert var.get() is False


@pytest.mark.parametrize("var", [CARDCAGE_STRICT_HOOKS, CARDCAGE_DEFERRED_HOOKS])
def test_a_boolean_variable_set_to_an_invalid_value_raises_naming_it(
    var: EnvVar[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(var.name, "yes")

    with pytest.raises(InvalidEnvVarError, match=var.name):
        var.get()


@pytest.mark.parametrize("var", [CARDCAGE_STRICT_HOOKS, CARDCAGE_DEFERRED_HOOKS])
def test_a_boolean_variable_set_to_empty_is_an_error_not_false(
    var: EnvVar[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(var.name, "")

    with pytest.raises(InvalidEnvVarError):
        var.get()


def test_variables_are_read_live_on_every_get(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CARDCAGE_STRICT_HOOKS.name, "0")
    before = CARDCAGE_STRICT_HOOKS.get()
    monkeypatch.setenv(CARDCAGE_STRICT_HOOKS.name, "1")

    assert (before, CARDCAGE_STRICT_HOOKS.get()) == (False, True)


def test_raw_and_is_set_report_the_unparsed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CARDCAGE_STRICT_HOOKS.name, " junk ")
    seen_set = (CARDCAGE_STRICT_HOOKS.raw(), CARDCAGE_STRICT_HOOKS.is_set())
    monkeypatch.delenv(CARDCAGE_STRICT_HOOKS.name)

    assert seen_set == (" junk ", True)
    assert (CARDCAGE_STRICT_HOOKS.raw(), CARDCAGE_STRICT_HOOKS.is_set()) == (None, False)


# -- strings and the allowlist --------------------------------------------------------------


@pytest.mark.parametrize(("raw", "expected"), [(None, ""), ("", ""), ("  cuda_x \n", "cuda_x")])
def test_the_platform_selector_is_stripped_and_empty_means_unset(
    raw: str | None, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if raw is None:
        monkeypatch.delenv(SGLANG_PLATFORM.name, raising=False)
    else:
        monkeypatch.setenv(SGLANG_PLATFORM.name, raw)

    assert SGLANG_PLATFORM.get() == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", None),
        ("  \t", None),
        (",", frozenset()),
        (" , ,", frozenset()),
        ("a", frozenset({"a"})),
        (" a , b ", frozenset({"a", "b"})),
        ("a,,b,", frozenset({"a", "b"})),
        ("a,a", frozenset({"a"})),
    ],
    ids=["empty", "blank", "comma", "commas-and-blanks", "one", "padded", "empty-items", "dup"],
)
def test_parse_allowlist(raw: str, expected: frozenset[str] | None) -> None:
    assert parse_allowlist("MY_LIST", raw) == expected


def test_the_allowlist_variable_is_no_filter_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SGLANG_PLUGINS.name, raising=False)

    assert SGLANG_PLUGINS.get() is None


def test_the_allowlist_variable_parses_its_live_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SGLANG_PLUGINS.name, " alpha ,gamma")

    assert SGLANG_PLUGINS.get() == frozenset({"alpha", "gamma"})


_NAME = st.text(alphabet=st.characters(exclude_characters=",", codec="utf-8"), min_size=1).filter(
    lambda s: s.strip() == s and s != ""
)
_PAD = st.sampled_from(["", " ", "\t", "  "])


@given(names=st.lists(_NAME, min_size=1, max_size=6), pads=st.lists(_PAD, min_size=12))
def test_parse_allowlist_round_trips_stripped_names(names: list[str], pads: list[str]) -> None:
    raw = ",".join(f"{pads[2 * i]}{name}{pads[2 * i + 1]}" for i, name in enumerate(names))

    assert parse_allowlist("MY_LIST", raw) == frozenset(names)


@given(st.lists(st.sampled_from([",", " ", "\t"]), min_size=1).filter(lambda xs: "," in xs))
def test_parse_allowlist_of_only_commas_and_blanks_allows_nothing(parts: list[str]) -> None:
    assert parse_allowlist("MY_LIST", "".join(parts)) == frozenset()


# -- the registry -------------------------------------------------------------------------


def test_the_registry_lists_every_core_variable_in_declaration_order() -> None:
    assert [var.name for var in ENV_VARS] == [
        "SGLANG_PLATFORM",
        "SGLANG_DIFFUSION_PLATFORM_OVERRIDE",
        "SGLANG_PLUGINS",
        "CARDCAGE_STRICT_HOOKS",
        "CARDCAGE_DEFERRED_HOOKS",
        "CARDCAGE_EARLY_PATCHES",
    ]


def test_every_variable_a_built_in_profile_reads_is_declared() -> None:
    # `cardcage env` and the docs list the registry: a selector or allowlist missing from it
    # would be read by the loader yet documented nowhere.
    read = {
        env for p in (SRT_PROFILE, DIFFUSION_PROFILE) for env in (p.selector_env, p.allowlist_env)
    }
    assert read <= {var.name for var in ENV_VARS}


def test_every_registered_variable_has_a_kind_and_a_description() -> None:
    undocumented = [var.name for var in ENV_VARS if not var.kind or len(var.description) < 20]

    assert undocumented == []


def test_the_registry_looks_variables_up_by_name() -> None:
    assert ENV_VARS["CARDCAGE_STRICT_HOOKS"] is CARDCAGE_STRICT_HOOKS
    assert "SGLANG_PLUGINS" in ENV_VARS
    assert "SGLANG_NOT_A_VARIABLE" not in ENV_VARS


def test_the_registry_names_its_distribution() -> None:
    assert ENV_VARS.distribution == "cardcage-core-hooks"


def test_declaring_a_variable_twice_is_rejected() -> None:
    registry = EnvRegistry("some-dist")
    registry.add(EnvVar("SOME_FLAG", False, parse_bool, "boolean", "A flag."))

    with pytest.raises(ValueError, match="SOME_FLAG is declared twice"):
        registry.add(EnvVar("SOME_FLAG", True, parse_bool, "boolean", "Again."))
