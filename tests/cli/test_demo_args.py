"""``kclient demo``'s numeric options: a value that makes no sense is refused by the
parser, naming the option (a negative --records used to run and report records lost)."""

from __future__ import annotations

import argparse

import pytest

from kclient.cli.demo import add_arguments


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kclient demo", exit_on_error=False)
    add_arguments(parser)
    return parser.parse_args(argv)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--records", "-5"], "argument --records: must be 0 or more, got -5"),
        (["--partitions", "0"], "argument --partitions: must be 1 or more, got 0"),
        (["--batch-size", "0"], "argument --batch-size: must be 1 or more, got 0"),
        (["--linger-ms", "ten"], "argument --linger-ms: 'ten' is not a whole number"),
    ],
)
def test_senseless_numbers_are_refused_naming_the_option(argv: list[str], message: str) -> None:
    with pytest.raises(argparse.ArgumentError) as refused:
        _parse(*argv)
    assert str(refused.value) == message


def test_the_smallest_sensible_values_are_taken() -> None:
    args = _parse("--records", "0", "--value-size", "0", "--partitions", "1", "--brokers", "1")
    assert (args.records, args.value_size, args.partitions, args.brokers) == (0, 0, 1, 1)
