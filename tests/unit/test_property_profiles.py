"""The suite's property tests fail only for a reason: ``make test`` runs them derandomized
(hypothesis's ``ci`` profile of ``tests/conftest.py``), ``make test-random`` with a fresh
seed it prints, and neither times them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[2]


def test_the_ci_profile_draws_the_same_examples_every_run() -> None:
    ci = settings.get_profile("ci")
    assert ci.derandomize
    assert ci.database is None  # no example saved by an earlier run is replayed
    assert ci.print_blob


@pytest.mark.parametrize("name", ["ci", "random"])
def test_no_profile_times_a_test(name: str) -> None:
    profile = settings.get_profile(name)
    assert profile.deadline is None
    assert HealthCheck.too_slow in profile.suppress_health_check


def test_the_random_profile_draws_fresh_examples() -> None:
    random = settings.get_profile("random")
    assert not random.derandomize
    assert random.database is None  # a run is replayed by its seed alone


def planned(*args: str) -> str:
    """The commands ``make`` would run (``make -n``), whatever the environment sets."""
    make = shutil.which("make")
    assert make is not None, "make not found"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))}
    env.update(TESTS="tests/env-only", SEED="999", ROUNDS="7")
    done = subprocess.run(
        [make, "-n", "-C", str(ROOT), *args], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout


def test_make_test_runs_the_property_tests_derandomized() -> None:
    assert "-m pytest -q -p no:cacheprovider --durations=30 --hypothesis-profile=ci" in planned(
        "test"
    )


def test_make_test_random_prints_a_fresh_seed_and_replays_a_given_one() -> None:
    fresh = planned("test-random")
    assert "secrets.randbits(32)" in fresh
    assert "--hypothesis-profile=random --hypothesis-seed=$seed -m hypothesis" in fresh
    assert "make test-random SEED=$seed" in fresh  # printed with the seed
    assert "rounds=1;" in fresh  # the environment's ROUNDS, SEED and TESTS do not count
    assert "999" not in fresh
    assert "tests/env-only" not in fresh
    replay = planned("test-random", "SEED=12345", "ROUNDS=3", "TESTS=tests/unit")
    assert "seed=12345;" in replay
    assert "rounds=1;" in replay  # a given seed runs once
    assert "tests/unit || exit 1" in replay
    assert "rounds=4;" in planned("test-random", "ROUNDS=4")
