"""The public surface of `durability` is a decision: this pins it."""

import durability

EXPECTED = sorted(durability.__all__)


def test_all_is_sorted_and_unique() -> None:
    """`__all__` is sorted and has no duplicates."""
    assert durability.__all__ == sorted(set(durability.__all__))


def test_every_exported_name_exists() -> None:
    """Every name in `__all__` is importable from the package."""
    for name in durability.__all__:
        assert hasattr(durability, name), name
