"""CrashInjector: parsing, inertness and the raise-only mode used by in-process tests."""

from __future__ import annotations

import random

import pytest

from pipeline.crash import CRASH_POINTS, NO_CRASH, CrashInjector
from pipeline.errors import CrashSimulated, InvalidInputError


@pytest.mark.parametrize("point", sorted(CRASH_POINTS))
def test_no_crash_is_inert_at_every_point(point):
    assert not any(NO_CRASH.points.values())
    assert NO_CRASH(point) is None


def test_zero_probability_is_inert():
    injector = CrashInjector({point: 0.0 for point in CRASH_POINTS})
    assert not any(injector.points.values())
    for point in CRASH_POINTS:
        injector(point)


def test_a_sure_crash_happens_only_at_the_named_point():
    injector = CrashInjector({"after_extract": 1.0})
    assert injector.points == {"after_extract": 1.0} and not injector.kill
    injector("after_lease")
    injector("after_commit_before_ack")
    with pytest.raises(CrashSimulated) as info:
        injector("after_extract")
    assert info.value.point == "after_extract"


def test_crash_simulated_escapes_except_exception():
    def swallow() -> str:
        try:
            CrashInjector({"after_lease": 1.0})("after_lease")
        except Exception:  # what a careless handler in the worker would write
            return "absorbed"
        return "not reached"

    with pytest.raises(CrashSimulated):
        swallow()


def test_parse_reads_points_and_probabilities():
    injector = CrashInjector.parse(" after_commit_before_ack:0.1, after_publish_before_mark ,,")
    assert injector.points == {"after_commit_before_ack": 0.1, "after_publish_before_mark": 1.0}
    assert injector.kill  # parsed specs come from the environment of a real process
    assert CrashInjector.parse("after_lease", kill=False).kill is False


def test_parse_of_an_empty_spec_is_inert():
    assert not any(CrashInjector.parse("").points.values())
    assert not any(CrashInjector.parse(" , ").points.values())


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("after_lunch", "unknown point"),
        ("after_lease:abc", "bad probability"),
        ("after_lease:1.5", "probability must be in [0, 1]"),
        ("after_lease:-0.1", "probability must be in [0, 1]"),
    ],
)
def test_parse_refuses_bad_specs(spec, problem):
    with pytest.raises(InvalidInputError) as info:
        CrashInjector.parse(spec)
    assert problem in str(info.value)


def test_probability_is_drawn_from_the_injected_rng():
    draws = random.Random(7)
    expected = [draws.random() < 0.5 for _ in range(50)]
    injector = CrashInjector({"after_lease": 0.5}, rng=random.Random(7))
    crashed = []
    for _ in range(50):
        try:
            injector("after_lease")
            crashed.append(False)
        except CrashSimulated:
            crashed.append(True)
    assert crashed == expected
    assert any(crashed) and not all(crashed)
