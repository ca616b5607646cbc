"""`ReaderConfig` without a seed: refused as invalid configuration
(`pydantic.ValidationError`), in words that say what to pass and why."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from dataset_rt import ReaderConfig


@pytest.mark.parametrize(
    "settings", [{}, {"shuffle": False}, {"shuffle": True, "replacement": False}]
)
def test_a_reader_config_without_a_seed_says_why_the_seed_is_required(
    settings: dict[str, Any],
) -> None:
    with pytest.raises(pydantic.ValidationError) as raised:
        ReaderConfig(**settings)
    [error] = raised.value.errors()
    message = error["msg"]
    assert "ReaderConfig(seed=0)" in message, message  # what to pass
    assert "The seed keys the shuffled sample stream" in message, message  # why
    assert "resume state" in message, message
    assert error["type"] == "missing", error  # pydantic's type and phrase, as dataset-rt 0.2.4's
    assert message.startswith("Field required: "), message


def test_a_seed_given_by_name_or_in_a_mapping_is_accepted() -> None:
    assert ReaderConfig(seed=5, shuffle=False).seed == 5
    assert ReaderConfig.model_validate({"seed": 7}).seed == 7
    assert ReaderConfig(seed=1).model_copy(update={"shuffle": False}).shuffle is False


@pytest.mark.parametrize("seed", [-1, 2**64, "zero"])
def test_an_invalid_seed_keeps_pydantics_message_for_the_value(seed: object) -> None:
    with pytest.raises(pydantic.ValidationError) as raised:
        ReaderConfig(seed=seed)  # type: ignore[arg-type]
    [error] = raised.value.errors()
    assert error["loc"] == ("seed",), error
