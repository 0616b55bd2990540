"""Fixtures of the text tests: the bert-base-chinese vocabulary from the shared data, a linker over CMeKG."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def chinese_tokenizer(shared_data):
    from kgplm.text import load_tokenizer

    path = shared_data / "vocab" / "bert-base-chinese" / "vocab.txt"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return load_tokenizer(path)


@pytest.fixture(scope="session")
def cmekg_linker(cmekg_store):
    from kgplm.text import EntityLinker

    return EntityLinker(cmekg_store, min_length=1)
