"""The shared rule for renamed keywords and options: the old name works for one release, with a warning."""

from __future__ import annotations

import inspect
import warnings

import pytest

from kgplm._deprecation import DEFAULT_REMOVAL, DEFAULT_SINCE, renamed_keyword, renamed_keywords
from kgplm.exceptions import ConfigurationError, KgplmError


def test_the_old_keyword_moves_to_the_new_one_with_a_warning_naming_both_and_the_releases():
    kwargs = {"lr": 0.5, "epochs": 3}
    with pytest.warns(FutureWarning) as caught:
        result = renamed_keyword(kwargs, "lr", "learning_rate", since="0.2", removal="0.3", owner="train_it")
    assert result is kwargs and kwargs == {"epochs": 3, "learning_rate": 0.5}
    (warning,) = caught
    message = str(warning.message)
    for part in ("train_it", "'lr'", "'learning_rate'", "0.2", "0.3", "deprecated"):
        assert part in message, (part, message)


def test_the_default_stacklevel_points_at_the_line_that_called_the_renaming_function():
    def train(**kwargs):
        renamed_keyword(kwargs, "lr", "learning_rate")
        return kwargs

    with pytest.warns(FutureWarning) as caught:
        line = inspect.currentframe().f_lineno + 1
        train(lr=1.0)
    assert (caught[0].filename, caught[0].lineno) == (__file__, line)
    assert DEFAULT_SINCE in str(caught[0].message) and DEFAULT_REMOVAL in str(caught[0].message)


def test_nothing_happens_without_the_old_keyword():
    kwargs = {"learning_rate": 0.5}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert renamed_keyword(kwargs, "lr", "learning_rate") == {"learning_rate": 0.5}


def test_both_spellings_are_a_configuration_error_naming_both():
    kwargs = {"lr": 0.5, "learning_rate": 0.1}
    with pytest.raises(ConfigurationError, match=r"kgplm kg embed: .*option '--lr'.*'--learning-rate'"):
        renamed_keyword(
            {"--lr": 0.5, "--learning-rate": 0.1}, "--lr", "--learning-rate", owner="kgplm kg embed", kind="option"
        )
    with pytest.raises(KgplmError, match="pass only 'learning_rate'"):
        renamed_keyword(kwargs, "lr", "learning_rate")
    assert kwargs == {"lr": 0.5, "learning_rate": 0.1}  # left as given


@renamed_keywords({"lr": "learning_rate", "out": "output_dir"})
def _scaled(value: float, *, learning_rate: float = 0.01, output_dir: str = "here") -> tuple[float, str]:
    """Scale ``value`` by the learning rate."""
    return value * learning_rate, output_dir


def test_the_decorator_keeps_the_new_signature_and_maps_each_old_keyword():
    assert list(inspect.signature(_scaled).parameters) == ["value", "learning_rate", "output_dir"]
    assert _scaled.__doc__ == "Scale ``value`` by the learning rate." and _scaled.__name__ == "_scaled"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _scaled(2.0, learning_rate=0.5, output_dir="there") == (1.0, "there")
        assert _scaled(2.0) == (0.02, "here")
    with pytest.warns(FutureWarning) as caught:
        line = inspect.currentframe().f_lineno + 1
        assert _scaled(2.0, lr=0.5, out="there") == (1.0, "there")
    assert sorted(str(w.message).split(":")[0] for w in caught) == ["_scaled", "_scaled"]
    assert {(w.filename, w.lineno) for w in caught} == {(__file__, line)}  # the caller's line, not the wrapper's
    with pytest.raises(ConfigurationError, match="_scaled: got both"):
        _scaled(2.0, lr=0.5, learning_rate=0.5)
