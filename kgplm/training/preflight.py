"""What ``kgplm.train`` checks before it writes anything, and where checkpoints come from.

Every argument and input a run reads is checked here, before the run directory is touched, so a
call that fails leaves nothing behind that blocks its corrected call:

* the method, its ``model_options`` and the masking scheme;
* the text model and the tokenizer: a local directory, or a Hugging Face hub id resolved through
  ``huggingface_hub.snapshot_download`` (:func:`resolve_pretrained`); the checkpoint's
  ``config.json``; its vocabulary against the tokenizer's; ``max_length`` against its positions;
* the graph, which is opened (a graph is required unless the method and masking read none:
  :meth:`kgplm.methods.MethodSpec.needs_graph`);
* the corpus: the file exists, reads as UTF-8 in its format and holds at least one document;
* ``exclude_triples``: the file exists;
* ``init_from`` (continued pre-training): a kgplm pre-training run (or its ``model/`` directory)
  whose weights, encoder sizes and tokenizer the new run starts from (:func:`check_init_from`).

Hub ids: ``"org/name"`` or ``"org/name@revision"`` (a branch, tag or commit). The download honours
``HF_HUB_CACHE`` (the cache) and ``HF_HUB_OFFLINE=1`` (read the cache only; no network), read when
the call is made; only the files a BERT checkpoint and its tokenizer need are fetched.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgplm.exceptions import ConfigurationError, DataFormatError, MissingFileError

__all__ = [
    "resolve_pretrained",
    "PreparedInputs",
    "check_train_inputs",
    "text_fields",
    "HUB_FILES",
    "InitFrom",
    "check_init_from",
]

logger = logging.getLogger(__name__)

#: the files fetched from the hub for a text model or a tokenizer
HUB_FILES = (
    "config.json",
    "*.safetensors",
    "pytorch_model.bin",
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?(@[\w./-]+)?$")


@dataclass(frozen=True)
class Resolved:
    """A checkpoint source resolved to a local directory (or file); ``hub`` describes a hub snapshot."""

    path: Path
    hub: dict[str, str] | None = None


def _offline() -> bool:
    from huggingface_hub import constants

    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")
    return constants.is_offline_mode() or (value or "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def resolve_pretrained(source: str | os.PathLike, *, argument: str) -> Resolved:
    """A local path as it is; else a hub id (``org/name[@revision]``) downloaded to (or found in) the
    hub cache. Raises :class:`MissingFileError` naming what was tried and how to pass a directory."""
    path = Path(source)
    if path.exists():
        return Resolved(path)
    text = str(source)
    how = (
        f"pass a local directory holding config.json, the weights and vocab.txt (for instance one written by "
        f"save_pretrained, or by `huggingface-cli download {text} --local-dir DIR`)"
    )
    if isinstance(source, os.PathLike) or not _HUB_ID.match(text):
        raise MissingFileError(path, f"{argument} (not a directory, and not a Hugging Face hub id org/name); {how}")
    repo_id, _, revision = text.partition("@")
    from huggingface_hub import snapshot_download

    offline = _offline()
    try:
        directory = snapshot_download(
            repo_id,
            revision=revision or None,
            allow_patterns=list(HUB_FILES),
            cache_dir=os.environ.get("HF_HUB_CACHE") or None,
            local_files_only=offline,
        )
    except Exception as error:  # the hub client raises many types; all mean "not available"
        mode = "its cache only (HF_HUB_OFFLINE is set)" if offline else "the network and its cache"
        raise MissingFileError(
            path,
            f"{argument} {text!r}: no such local directory, and the Hugging Face hub did not provide it "
            f"(tried {mode}: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}); "
            f"{how}",
        ) from None
    directory = Path(directory)
    logger.info("%s %s resolved through the Hugging Face hub to %s", argument, text, directory)
    return Resolved(directory, {"id": repo_id, "revision": revision or "main", "snapshot": directory.name})


@dataclass
class PreparedInputs:
    """What :func:`check_train_inputs` resolved: the opened graph (or None), local checkpoint paths and
    the hub snapshots used (recorded in ``run_config.json`` under ``stages.hub``)."""

    store: Any
    text_model: Any
    tokenizer: Path | None
    text_fields: dict[str, Any]
    checkpoint: Path | None
    hub: dict[str, dict[str, str]] = field(default_factory=dict)


def text_fields(text_model, argument: str = "text_model") -> tuple[dict[str, Any], Path | None]:
    """(BERT config fields, checkpoint directory or None) of a resolved text model."""
    from kgplm.models import CPU_TEXT_ENCODER

    if text_model is None:
        return dict(CPU_TEXT_ENCODER), None
    if isinstance(text_model, dict):
        return dict(text_model), None
    directory = Path(text_model)
    if not (directory / "config.json").is_file():
        raise MissingFileError(directory / "config.json", f"BERT checkpoint configuration of {argument}")
    from transformers import BertConfig

    fields = BertConfig.from_pretrained(str(directory)).to_dict()
    for key in ("architectures", "model_type", "transformers_version", "_name_or_path"):
        fields.pop(key, None)
    return fields, directory


@dataclass(frozen=True)
class InitFrom:
    """A kgplm pre-trained model to continue from: its ``model/`` directory, its weights file, its
    tokenizer directory and the BERT fields of its config (the encoder's sizes)."""

    model_dir: Path
    weights: Path
    tokenizer: Path
    text_fields: dict[str, Any]


def check_init_from(source, *, text_model, tokenizer) -> InitFrom:
    """Resolve ``kgplm.train(init_from=...)``: a pre-training run directory (``model/`` and
    ``tokenizer/`` inside) or its ``model/`` directory (the tokenizer beside it). The encoder's sizes
    are the model's, so ``text_model`` must be ``None``; a given ``tokenizer`` must have its vocabulary
    size."""
    from transformers import BertConfig

    path = Path(source)
    model_dir = path / "model" if (path / "model" / "config.json").is_file() else path
    weights = model_dir / "model.safetensors"
    if not (model_dir / "config.json").is_file() or not weights.is_file():
        raise MissingFileError(
            path,
            "init_from: a kgplm pre-training run directory (holding model/config.json and "
            "model/model.safetensors, as kgplm.train writes) or its model/ directory",
        )
    if text_model is not None:
        raise ConfigurationError(
            f"init_from={str(source)!r} gives the encoder (its sizes and weights); text_model "
            f"must be None, got {text_model!r}"
        )
    import json

    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    if "method" not in config:
        raise ConfigurationError(
            f"{model_dir / 'config.json'} is not a kgplm model's config (no 'method' field); "
            f"continue from a Hugging Face BERT checkpoint with text_model= instead"
        )
    bert_fields = set(BertConfig().to_dict()) - {
        "architectures",
        "model_type",
        "transformers_version",
        "_name_or_path",
        "vocab_size",
        "pad_token_id",
    }
    fields = {name: config[name] for name in sorted(bert_fields) if name in config}
    tokenizer_dir = Path(tokenizer) if tokenizer is not None else model_dir.parent / "tokenizer"
    if not _has_tokenizer(tokenizer_dir):
        raise MissingFileError(
            tokenizer_dir,
            f"the tokenizer of init_from={str(source)!r} (its weights need the "
            f"vocabulary they were trained with); pass tokenizer=",
        )
    from kgplm.text.tokenization import load_tokenizer

    given = load_tokenizer(tokenizer_dir)
    if len(given) != config.get("vocab_size"):
        raise ConfigurationError(
            f"init_from's model has a vocabulary of {config.get('vocab_size')}, the tokenizer "
            f"{tokenizer_dir} one of {len(given)}"
        )
    own_dir = model_dir.parent / "tokenizer"
    if tokenizer is not None and _has_tokenizer(own_dir):
        # the same size is not the same vocabulary: every row of the embedding table must mean the same piece
        own = load_tokenizer(own_dir).get_vocab()
        differing = sorted(piece for piece, index in given.get_vocab().items() if own.get(piece) != index)
        if differing:
            raise ConfigurationError(
                f"the tokenizer {tokenizer_dir} numbers {len(differing)} pieces differently from "
                f"the vocabulary init_from's model was trained with ({own_dir}), e.g. "
                f"{differing[:5]}; pass that tokenizer or none"
            )
    return InitFrom(model_dir, weights, tokenizer_dir, fields)


def _has_tokenizer(directory: Path) -> bool:
    return (directory / "tokenizer.json").is_file() or (directory / "vocab.txt").is_file()


def _check_corpus(corpus, corpus_options: dict) -> None:
    """The corpus file exists, reads in its format and holds a document (its first is read)."""
    from kgplm.text.corpus import read_corpus

    try:
        first = next(iter(read_corpus(corpus, **corpus_options)), None)
    except TypeError as error:
        raise ConfigurationError(f"corpus_options {corpus_options} are not read_corpus options: {error}") from None
    if first is None:
        raise DataFormatError(
            "holds no document (every line or record is empty)",
            path=corpus,
            expected="at least one non-empty line, CSV row or JSON record",
        )


def check_train_inputs(
    spec,
    *,
    graph,
    corpus,
    corpus_options: dict,
    text_model,
    tokenizer,
    model_options: dict,
    masking: str,
    max_length: int,
    exclude_triples,
    progress: bool,
) -> PreparedInputs:
    """Check everything a pre-training run reads, before anything is written; see the module docstring."""
    unknown = set(model_options) - set(spec.config_class.option_names())
    if unknown:
        raise ConfigurationError(
            f"unknown model_options {sorted(unknown)} for method {spec.name!r}; it takes "
            f"{spec.config_class.option_names()}"
        )
    if exclude_triples is not None and not Path(exclude_triples).is_file():
        raise MissingFileError(exclude_triples, "exclude_triples file")
    _check_corpus(corpus, corpus_options)
    hub: dict[str, dict[str, str]] = {}
    if isinstance(text_model, (str, os.PathLike)):
        resolved = resolve_pretrained(text_model, argument="text_model")
        text_model = resolved.path
        if resolved.hub:
            hub["text_model"] = resolved.hub
    tokenizer_path = None
    if tokenizer is not None:
        resolved = resolve_pretrained(tokenizer, argument="tokenizer")
        tokenizer_path = resolved.path
        if resolved.hub:
            hub["tokenizer"] = resolved.hub
    fields, checkpoint = text_fields(text_model)
    if tokenizer_path is None and checkpoint is not None and _has_tokenizer(checkpoint):
        tokenizer_path = checkpoint
    if checkpoint is not None:
        if tokenizer_path is None:
            raise ConfigurationError(
                f"the text model {checkpoint} has no tokenizer (tokenizer.json or vocab.txt) "
                f"and its weights need the vocabulary they were trained with; pass tokenizer="
            )
        from kgplm.text.tokenization import load_tokenizer

        size = len(load_tokenizer(tokenizer_path))
        if size != fields.get("vocab_size"):
            raise ConfigurationError(
                f"the text model's vocabulary ({fields.get('vocab_size')}) differs from "
                f"the tokenizer's ({size}, {tokenizer_path})"
            )
    positions = fields.get("max_position_embeddings", 512)
    if max_length + 1 > positions:
        raise ConfigurationError(
            f"max_length {max_length} + 1 (the SOP separator) exceeds the text model's "
            f"max_position_embeddings {positions}"
        )
    store = None
    if graph is not None:
        from kgplm.kg import KGStore, open_store

        store = graph if isinstance(graph, KGStore) else open_store(graph, show_progress=progress)
    elif spec.needs_graph(masking):
        raise ConfigurationError(
            f"method {spec.name!r} with {masking!r} masking reads a knowledge graph: pass "
            f"graph= (a KGStore, a saved store, an RDF/OBO/TSV file, a UMLS directory or "
            f"'cmekg')"
        )
    return PreparedInputs(
        store=store, text_model=text_model, tokenizer=tokenizer_path, text_fields=fields, checkpoint=checkpoint, hub=hub
    )
