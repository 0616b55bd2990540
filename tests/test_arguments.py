"""The argument dataclasses, the command line generated from them, and the earlier spellings."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import subprocess
import sys
import warnings

import pytest

import kgplm
from kgplm import api
from kgplm.finetuning import api as finetuning_api
from kgplm.arguments import (
    EvaluationArguments,
    FineTuningArguments,
    LazyChoices,
    PredictionArguments,
    PretrainingArguments,
    flag,
    from_namespace,
    resolve,
)
from kgplm.cli import build_parser
from kgplm.exceptions import ConfigurationError

#: command → (its arguments class, the Python function, the flags the command has beyond the class's fields)
COMMANDS = {
    "train": (PretrainingArguments, kgplm.train, {"method", "config", "columns", "encoding"}),
    "finetune": (FineTuningArguments, kgplm.finetune, set()),
    "evaluate": (EvaluationArguments, kgplm.evaluate, set()),
    "predict": (PredictionArguments, kgplm.predict, set()),
}


def subparser(command: str) -> argparse.ArgumentParser:
    parser = build_parser()
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    return commands.choices[command]


def flags_by_field(parser: argparse.ArgumentParser) -> dict[str, set[str]]:
    """dest → its option strings, the hidden earlier spellings left out."""
    found: dict[str, set[str]] = {}
    for action in parser._actions:
        if not action.option_strings or action.dest == "help" or action.help == argparse.SUPPRESS:
            continue
        found.setdefault(action.dest, set()).update(action.option_strings)
    return found


def field_defaults(cls) -> dict:
    return {item.name: item.default for item in dataclasses.fields(cls) if item.default is not dataclasses.MISSING}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_field_has_its_flag_and_every_flag_a_field(command):
    cls, function, extras = COMMANDS[command]
    fields = {item.name for item in dataclasses.fields(cls)}
    flags = flags_by_field(subparser(command))
    assert set(flags) - extras == fields
    for name in fields:
        assert flag(name) in flags[name], name  # the flag is the field's name, spelled with dashes
    # the Python function takes exactly the same names (and args=), with the same defaults
    parameters = inspect.signature(function).parameters
    assert set(parameters) - {"method", "args"} == fields
    for name, default in field_defaults(cls).items():
        assert parameters[name].default == default, name


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_command_line_defaults_are_the_dataclass_defaults(command):
    cls, _, _ = COMMANDS[command]
    required = {
        "finetune": ["--model", "m", "--task", "t", "--data-dir", "d", "--output-dir", "o"],
        "evaluate": ["--model", "m", "--data-dir", "d"],
        "predict": ["--model", "m", "--data-dir", "d", "--output-dir", "o"],
        "train": ["--corpus", "c", "--output-dir", "o"],
    }[command]
    namespace = build_parser().parse_args([command, *required])
    parsed = from_namespace(cls, namespace)
    for name, default in field_defaults(cls).items():
        assert getattr(parsed, name) == default, name


def _other_value(item: dataclasses.Field, action: argparse.Action):
    """A command-line value for ``item`` that differs from its default, and the value it must parse to."""
    default = item.default
    if isinstance(action, argparse.BooleanOptionalAction):
        return ([flag(item.name)] if default is not True else [f"--no-{item.name.replace('_', '-')}"]), (
            default is not True
        )
    if action.choices is not None:
        choices = list(action.choices.values() if isinstance(action.choices, LazyChoices) else action.choices)
        value = next(choice for choice in choices if choice != default)
        return [flag(item.name), value], value
    if action.nargs in ("*", "+"):
        return [flag(item.name), "SIGINT"], ("SIGINT",) if isinstance(default, tuple) else ["SIGINT"]
    if item.name in ("corpus_options", "model_options", "method_data", "linking"):
        return [flag(item.name), '{"a": 1}'], {"a": 1}
    if item.name == "text_model":
        return [flag(item.name), '{"hidden_size": 8}'], {"hidden_size": 8}
    parse = action.type
    if parse is int or getattr(parse, "__name__", "") == "int":
        return [flag(item.name), "7"], 7
    if parse is float or getattr(parse, "__name__", "") == "float":
        return [flag(item.name), "0.25"], 0.25
    return [flag(item.name), "some/value"], "some/value"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_flag_reaches_its_field(command):
    """One non-default value per flag, parsed and turned into the dataclass, arrives in its field."""
    cls, _, _ = COMMANDS[command]
    parser = subparser(command)
    actions = {action.dest: action for action in parser._actions if action.help != argparse.SUPPRESS}
    argv, expected = [], {}
    for item in dataclasses.fields(cls):
        words, value = _other_value(item, actions[item.name])
        argv += words
        expected[item.name] = value
    if command == "train":
        argv = ["--method", "mlm", *argv]
    parsed = from_namespace(cls, build_parser().parse_args([command, *argv]))
    for name, value in expected.items():
        assert getattr(parsed, name) == value, name


def test_train_help_lists_every_field_by_group(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    text = capsys.readouterr().out
    for item in dataclasses.fields(PretrainingArguments):
        assert flag(item.name) in text, item.name
    for group in ("data and graph:", "knowledge artefacts:", "model:", "optimisation:", "hardware:", "reporting:"):
        assert group in text


def test_the_private_bodies_take_the_fields_in_their_recorded_order():
    """``run_config.json`` and ``finetune_config.json`` record the arguments in the bodies' parameter order."""
    train_names = list(inspect.signature(api._train).parameters)[1:]
    assert train_names == [item.name for item in dataclasses.fields(PretrainingArguments)]
    finetune_names = list(inspect.signature(finetuning_api._finetune).parameters)
    assert finetune_names == [item.name for item in dataclasses.fields(FineTuningArguments)]


def test_keywords_fill_the_dataclass_and_replace_fields_of_args():
    args = PretrainingArguments(corpus="c.txt", output_dir="runs/a", max_steps=5)
    assert (
        resolve(PretrainingArguments, None, {"corpus": "c.txt", "output_dir": "runs/a", "max_steps": 5}, function="f")
        == args
    )
    replaced = resolve(PretrainingArguments, args, {"max_steps": 9}, function="f")
    assert replaced.max_steps == 9 and replaced.corpus == "c.txt" and args.max_steps == 5


def test_an_unknown_argument_is_refused_with_the_closest_name():
    with pytest.raises(ConfigurationError, match=r"'lerning_rate' \(did you mean 'learning_rate'\?\)"):
        kgplm.train("mlm", corpus="c.txt", output_dir="o", lerning_rate=1e-3)
    with pytest.raises(ConfigurationError, match="needs corpus"):
        kgplm.train("mlm", output_dir="o")
    with pytest.raises(ConfigurationError, match="takes a FineTuningArguments"):
        kgplm.finetune(args=PretrainingArguments(corpus="c", output_dir="o"))


def test_the_earlier_output_and_neighbour_table_flags_warn_and_still_work():
    parser = build_parser()
    with pytest.warns(FutureWarning, match="'--out' is deprecated .* use '--output-dir'"):
        namespace = parser.parse_args(["finetune", "--model", "m", "--task", "t", "--data-dir", "d", "--out", "o"])
    assert namespace.output_dir == "o"
    with pytest.warns(FutureWarning) as caught:
        namespace = parser.parse_args(["train", "--method", "mlm", "--corpus", "c", "--out", "o", "--pepr", "t.npz"])
    messages = sorted(str(warning.message).split(" is deprecated")[0] for warning in caught)
    assert messages == ["the option '--out'", "the option '--pepr'"]
    assert "use '--neighbor-table'" in str(caught[-1].message)
    assert (namespace.output_dir, namespace.neighbor_table) == ("o", "t.npz")
    with pytest.warns(FutureWarning, match="'--out' is deprecated .* use '--output'$"):
        namespace = parser.parse_args(["kg", "pepr", "--out", "t.npz"])
    assert namespace.output == "t.npz"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new spellings do not warn
        parser.parse_args(["finetune", "--model", "m", "--task", "t", "--data-dir", "d", "--output-dir", "o"])


def test_a_required_output_is_still_required_with_its_earlier_spelling_hidden(capsys):
    from kgplm.cli import main

    assert_exit = pytest.raises(SystemExit)
    with assert_exit as raised:
        main(["finetune", "--model", "m", "--task", "t", "--data-dir", "d"])
    assert raised.value.code == 2
    assert "the following arguments are required: --output-dir" in capsys.readouterr().err


def test_a_misspelt_method_is_refused_on_the_command_line_before_torch_loads(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("一句话\n", encoding="utf-8")
    script = (
        "import sys\n"
        "from kgplm.cli import main\n"
        f"status = main(['train', '--method', 'smedbrt', '--corpus', {str(corpus)!r}, '--output-dir', "
        f"{str(tmp_path / 'run')!r}])\n"
        "print(status, 'torch' in sys.modules)\n"
    )
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert completed.stdout.split() == ["2", "False"]
    assert "unknown method 'smedbrt'" in completed.stderr
    assert not (tmp_path / "run").exists()
