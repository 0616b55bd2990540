"""The control's learning-rate rule: the largest rate whose control keeps the base's dev score."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

import control_protocol  # noqa: E402

from kgplm.exceptions import ConfigurationError  # noqa: E402


def _records(devs):
    return [{"learning_rate": rate, "warmup_steps": 40, "dev": dev} for rate, dev in devs]


def test_the_largest_rate_that_keeps_the_bases_dev_score():
    records = _records([(1e-3, 0.30), (5e-4, 0.41), (2e-4, 0.45), (1e-4, 0.40)])
    # base 0.40: 5e-4, 2e-4 and 1e-4 keep it; the largest of them, not the best-scoring one
    choice = control_protocol.choose_rate(records, 0.40)
    assert (choice["learning_rate"], choice["control_dev"], choice["loses_ground"]) == (5e-4, 0.41, False)
    # no rate keeps it: the smallest, flagged
    lost = control_protocol.choose_rate(records, 0.50)
    assert (lost["learning_rate"], lost["loses_ground"]) == (1e-4, True)
    with pytest.raises(ConfigurationError, match="no control runs"):
        control_protocol.choose_rate([], 0.4)


def test_rates_run_largest_first_and_stop_once_one_keeps_the_base():
    rates = [1e-4, 1e-3, 5e-4, 2e-4]
    assert control_protocol.next_rate(rates, {}, 0.40) == 1e-3
    assert control_protocol.next_rate(rates, {1e-3: 0.30}, 0.40) == 5e-4  # 1e-3 lost ground: the next one down
    assert control_protocol.next_rate(rates, {1e-3: 0.30, 5e-4: 0.41}, 0.40) is None  # 5e-4 is the choice
    assert control_protocol.next_rate(rates, {1e-3: 0.40}, 0.40) is None  # "at least the base's" counts equal
    lost = {1e-3: 0.1, 5e-4: 0.2, 2e-4: 0.3, 1e-4: 0.35}
    assert control_protocol.next_rate(rates, lost, 0.40) is None  # all run, none kept it
    # the rates a stopped run settles on give the rule's choice over every rate
    ran = {1e-3: 0.30, 5e-4: 0.41}
    everything = {**ran, 2e-4: 0.45, 1e-4: 0.40}
    assert (
        control_protocol.choose_rate(_records(ran.items()), 0.40)["learning_rate"]
        == control_protocol.choose_rate(_records(everything.items()), 0.40)["learning_rate"]
        == 5e-4
    )
