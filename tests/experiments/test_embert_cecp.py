"""experiments/embert_cecp.py (issue 28.2): the base must share the vocabulary token by token, and the chance
band of a logged training accuracy and the "leaves chance" verdict follow their definitions."""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

import embert_cecp  # noqa: E402

from kgplm.exceptions import ConfigurationError  # noqa: E402

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def fake_run(directory: Path, vocabulary: list[str], *, method: str = "mlm", corpus: str = "corpus.txt") -> Path:
    """A pre-training run directory as kgplm.train leaves it, as far as check_base reads it."""
    (directory / "model").mkdir(parents=True)
    (directory / "tokenizer").mkdir()
    (directory / "tokenizer" / "vocab.txt").write_text("\n".join(vocabulary) + "\n", encoding="utf-8")
    (directory / "model" / "config.json").write_text(json.dumps({"method": method, "vocab_size": len(vocabulary)}))
    (directory / "model" / "model.safetensors").write_bytes(b"weights")
    (directory / "run_config.json").write_text(json.dumps({"corpus": f"/somewhere/{corpus}", "max_steps": 2000}))
    return directory


def shared_with(tmp_path: Path, vocabulary: list[str], corpus: str = "corpus.txt") -> SimpleNamespace:
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "vocab.txt").write_text("\n".join(vocabulary) + "\n", encoding="utf-8")
    return SimpleNamespace(tokenizer=tmp_path / "shared", corpus=tmp_path / corpus)


def test_the_base_must_have_the_shared_vocabulary_token_by_token(tmp_path):
    vocabulary = SPECIAL + ["高", "血", "压", "##压"]
    shared = shared_with(tmp_path, vocabulary)
    record = embert_cecp.check_base(fake_run(tmp_path / "same", vocabulary), shared)
    assert record["weights_sha256"] == hashlib.sha256(b"weights").hexdigest() and record["steps"] == 2000
    # the same size, another vocabulary (a tokenizer trained on another corpus): refused, not just size-checked
    other = SPECIAL + ["高", "压", "血", "##压"]
    with pytest.raises(ConfigurationError, match="is not the shared one"):
        embert_cecp.check_base(fake_run(tmp_path / "other", other), shared)
    with pytest.raises(ConfigurationError, match="method 'electra'"):
        embert_cecp.check_base(fake_run(tmp_path / "electra", vocabulary, method="electra"), shared)
    with pytest.raises(ConfigurationError, match="trained on"):
        embert_cecp.check_base(fake_run(tmp_path / "elsewhere", vocabulary, corpus="other.txt"), shared)


def test_chance_band_is_the_half_width_of_a_mean_of_per_step_accuracies():
    # steps with 100, 0 (not logged) and 25 targets: 1.96 · √(0.25/100 + 0.25/25) / 2
    assert embert_cecp.chance_band([100, 0, 25]) == pytest.approx(1.959964 * math.sqrt(0.0125) / 2)
    assert embert_cecp.chance_band([400]) == pytest.approx(1.959964 * 0.025)  # one step: the binomial's
    assert math.isnan(embert_cecp.chance_band([0, 0]))


def test_leaves_chance_at_the_first_log_point_above_the_band():
    curve = [
        {"step": 25, "cecp_accuracy": 0.58, "chance_half_width": 0.1},
        {"step": 50, "cecp_accuracy": 0.65, "chance_half_width": 0.1},
        {"step": 75, "cecp_accuracy": 0.55, "chance_half_width": 0.1},
        {"step": 100, "cecp_accuracy": 0.9, "chance_half_width": 0.1},
    ]
    assert embert_cecp.leaves_chance(curve) == {
        "first_step_above_chance": 50,
        "stays_above_after_it": False,
        "above_from_step_on": 100,
        "log_points_above": 2,
        "log_points": 4,
    }
    assert embert_cecp.leaves_chance(curve[:3])["above_from_step_on"] is None  # the last point is at chance
    assert embert_cecp.leaves_chance(curve[:1])["first_step_above_chance"] is None
