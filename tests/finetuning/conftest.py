"""Fixtures of the fine-tuning tests: the bert-base-chinese tokenizer and the tasks root of the shared data."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def tokenizer(shared_data):
    from kgplm.text.tokenization import load_tokenizer

    return load_tokenizer(shared_data / "vocab" / "bert-base-chinese" / "vocab.txt")


@pytest.fixture(scope="module")
def tasks_root(shared_data):
    return shared_data / "tasks"
