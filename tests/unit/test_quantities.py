"""kvset.quantities: binary byte units, always labelled."""

import pytest

from kvset.quantities import GIB, KIB, MIB, TIB, format_bytes, format_gib, parse_bytes, parse_sizes


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (327_680, "320.0 KiB"),  # Llama-3.1-70B bf16 bytes per token: 327,680 / 1024 = 320
        (0, "0 B"),
        (512, "512 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (5_242_880, "5.0 MiB"),  # 327,680 x 16 tokens = 5 x 1024^2
        (10 * GIB, "10.0 GiB"),
        (3 * TIB // 2, "1.5 TiB"),
        (-2 * MIB, "-2.0 MiB"),
    ],
)
def test_format_bytes_uses_the_largest_binary_unit(n, text):
    assert format_bytes(n) == text


def test_format_bytes_precision_and_non_finite():
    assert format_bytes(1536, precision=2) == "1.50 KiB"
    with pytest.raises(ValueError):
        format_bytes(float("inf"))


def test_format_gib_is_always_gib():
    assert format_gib(10_737_418_240) == "10.00 GiB"  # 10 x 1024^3
    assert format_gib(512 * MIB) == "0.50 GiB"
    assert format_gib(3 * GIB, precision=0) == "3 GiB"


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("4096", 4096),
        ("1.5GiB", 1_610_612_736),  # 1.5 x 1024^3
        ("512 MiB", 512 * MIB),
        ("2k", 2 * KIB),
        ("80GB", 80_000_000_000),  # decimal suffix means decimal
        ("1TiB", TIB),
    ],
)
def test_parse_bytes(text, n):
    assert parse_bytes(text) == n


@pytest.mark.parametrize("text", ["", "GiB", "1.5 furlongs", "-3GiB", "1e9"])
def test_parse_bytes_rejects_what_is_not_a_quantity(text):
    with pytest.raises(ValueError):
        parse_bytes(text)


def test_parse_sizes_keeps_the_order_and_one_unit():
    assert parse_sizes("5000,1000,1e5") == ((5000, 1000, 100000), "blocks")
    assert parse_sizes("80GiB, 512 GiB,4TiB") == ((80 * GIB, 512 * GIB, 4 * TIB), "bytes")
    assert parse_sizes("80GB") == ((80 * 10**9,), "bytes")
    for bad, message in (
        ("80GiB,1000", "not both"),
        ("", "no size"),
        ("0", "at least 1"),
        ("1.5", "whole"),
        ("0GiB", "at least 1 byte"),
        ("12 parsecs", "unit"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_sizes(bad)


def test_a_target_given_as_a_bare_percentage_asks_whether_a_percent_was_meant():
    from kvset.quantities import parse_fractions

    with pytest.raises(ValueError, match=r"did you mean 95%\?"):
        parse_fractions("95")
    for wrong in ("950", "0", "-3", "150%"):
        with pytest.raises(ValueError) as refused:
            parse_fractions(wrong)
        assert "did you mean" not in str(refused.value)


def test_gpus_are_three_significant_digits_with_their_unit_and_a_lower_bound_marked():
    from kvset.quantities import MISSING, format_gpus

    assert [format_gpus(x) for x in (0.4, 1, 2.3125, 1234.5)] == [
        "0.4 GPUs",
        "1 GPU",
        "2.31 GPUs",
        "1,234 GPUs",
    ]
    assert format_gpus(2.3125, at_least=True, with_unit=False) == "≥2.31"
    assert format_gpus(None) == format_gpus(float("nan")) == MISSING
