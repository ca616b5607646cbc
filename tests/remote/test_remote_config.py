"""RemoteConfig: defaults, validation errors naming the bad value, and the local
directory rule (local_dir, then $DATASET_RT_CACHE_DIR, then the platform's user cache
directory + dataset-rt)."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from dataset_rt import RemoteConfig
from dataset_rt._config import platform_cache_dir

_U32_MAX = 2**32 - 1


def test_every_field_is_optional_with_the_documented_defaults() -> None:
    config = RemoteConfig()
    assert (config.local_dir, config.budget_bytes, config.retries) == (None, None, 5)
    assert (config.timeout_s, config.max_in_flight, config.revalidate) == (60.0, 4, True)
    with pytest.raises(ValidationError, match="frozen"):
        setattr(config, "retries", 1)  # noqa: B010 (mypy does not know it is frozen)
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        RemoteConfig(budget=1)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("budget_bytes", 0, "greater than or equal to 1"),
        ("budget_bytes", 2**64, "less than or equal to"),
        ("budget_bytes", 1.5, "valid integer"),
        ("budget_bytes", True, "valid integer"),
        ("retries", -1, "greater than or equal to 0"),
        ("retries", "5", "valid integer"),
        ("retries", _U32_MAX + 1, "less than or equal to 4294967295"),
        ("max_in_flight", 0, "greater than or equal to 1"),
        ("max_in_flight", _U32_MAX + 1, "less than or equal to 4294967295"),
        ("timeout_s", 0, "timeout_s must be a positive, finite number of seconds, got 0"),
        ("timeout_s", -1.0, "got -1.0"),
        ("timeout_s", math.inf, "got inf"),
        ("timeout_s", math.nan, "got nan"),
        ("timeout_s", "60", "timeout_s must be a number of seconds, got '60'"),
        ("timeout_s", True, "got True"),
        ("local_dir", "", "local_dir must name a directory (not empty, no NUL byte), got ''"),
        ("local_dir", "a\x00b", "no NUL byte"),
        ("local_dir", 3, "local_dir must be a str, a Path or None, got 3"),
        ("revalidate", "no", "valid boolean"),
        ("revalidate", 0, "valid boolean"),
    ],
)
def test_a_bad_value_is_refused_naming_it(field: str, value: object, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        RemoteConfig.model_validate({field: value})
    assert field in str(caught.value)
    assert message in str(caught.value)


def test_the_largest_values_fit_their_c_fields() -> None:
    config = RemoteConfig(budget_bytes=2**64 - 1, retries=_U32_MAX, max_in_flight=_U32_MAX)
    assert config.budget_bytes == 2**64 - 1 and config.max_in_flight == _U32_MAX


@given(st.floats(min_value=1e-9, max_value=1e12))
def test_any_positive_finite_timeout_is_kept(timeout: float) -> None:
    assert RemoteConfig(timeout_s=timeout).timeout_s == timeout


@given(st.one_of(st.floats(max_value=0.0), st.just(math.inf), st.just(math.nan)))
def test_no_other_timeout_is_accepted(timeout: float) -> None:
    with pytest.raises(ValidationError, match="timeout_s must be a positive, finite number"):
        RemoteConfig(timeout_s=timeout)


def test_local_dir_comes_first_then_the_variable_then_the_platform(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DATASET_RT_CACHE_DIR", str(tmp_path / "from-env"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert RemoteConfig(local_dir=tmp_path / "mine").resolved_local_dir() == tmp_path / "mine"
    assert RemoteConfig(local_dir="~/copies").resolved_local_dir() == tmp_path / "home/copies"
    assert RemoteConfig().resolved_local_dir() == tmp_path / "from-env"
    monkeypatch.setenv("DATASET_RT_CACHE_DIR", "")  # empty: as if unset
    expected = platform_cache_dir(sys.platform, os.environ, Path.home())
    assert RemoteConfig().resolved_local_dir() == expected / "dataset-rt"


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="the XDG rule")
def test_on_linux_the_user_cache_is_xdg_cache_home_or_dot_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("DATASET_RT_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert RemoteConfig().resolved_local_dir() == tmp_path / "xdg" / "dataset-rt"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/xdg")  # not absolute: ignored (XDG spec)
    assert RemoteConfig().resolved_local_dir() == tmp_path / ".cache" / "dataset-rt"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert RemoteConfig().resolved_local_dir() == tmp_path / ".cache" / "dataset-rt"


def test_each_platform_has_its_user_cache_directory() -> None:
    home = Path("/home/u")
    assert platform_cache_dir("darwin", {"XDG_CACHE_HOME": "/x"}, home) == home / "Library/Caches"
    assert platform_cache_dir("win32", {"LOCALAPPDATA": "/l"}, home) == Path("/l")
    assert platform_cache_dir("win32", {}, home) == home / "AppData" / "Local"
    assert platform_cache_dir("linux", {}, home) == home / ".cache"
    assert platform_cache_dir("freebsd14", {"XDG_CACHE_HOME": "/x"}, home) == Path("/x")
