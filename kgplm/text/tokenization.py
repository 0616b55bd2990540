"""In-domain WordPiece vocabularies and fast tokenizers with character offsets.

``build_vocab`` trains a WordPiece vocabulary the way eHealth (Wang et al. 2021, "Pre-training a
Chinese biomedical language model", §3.1) does: the text is lower-cased, full-width and other
compatibility forms are normalised (NFKC: ``ＭＲＩ`` → ``mri``, ``①`` → ``1``), control
characters dropped, every Chinese character becomes its own token, Latin words and abbreviations
(IHC, TSHR, MRI) stay whole or split into word pieces, and pieces seen fewer than
``min_frequency`` (5) times are dropped.

``load_tokenizer`` reloads a saved tokenizer directory, or wraps an existing ``vocab.txt``. A
third-party vocabulary (bert-base-chinese's, a Chinese medical BERT's) is wrapped exactly as
``transformers.BertTokenizer.from_pretrained(<its directory>)`` and tokenizers'
``BertWordPieceTokenizer(vocab, lowercase=True)`` wrap it — BERT's normaliser alone, no NFKC — so a
model is fed the ids it was trained on (with NFKC in front, 190 of the 215 cMedQANER test texts got
other ids: full-width punctuation became ASCII). NFKC stays for the vocabularies kgplm trains
itself. Which normalisation a tokenizer uses (:func:`normalization_of`: ``"nfkc+bert"`` or
``"bert"``) is in its ``tokenizer.json`` and recorded in ``tokenizer_config.json``
(``kgplm_normalization``), so reloading either file keeps it.

Both return a ``transformers.PreTrainedTokenizerFast``: it gives ``offset_mapping`` into the
*original* text (the normalisers are alignment-preserving), which is how mentions are mapped to
tokens (:mod:`kgplm.text.alignment`), and it saves with ``save_pretrained``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from kgplm.exceptions import ConfigurationError, MissingFileError

__all__ = [
    "SPECIAL_TOKENS",
    "NORMALIZATIONS",
    "build_vocab",
    "load_tokenizer",
    "save_tokenizer",
    "wordpiece_pipeline",
    "normalization_of",
]

logger = logging.getLogger(__name__)

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
#: ``"nfkc+bert"``: kgplm's own vocabularies; ``"bert"``: BERT's normaliser alone (third-party vocabularies).
NORMALIZATIONS = ("nfkc+bert", "bert")
_RECORD_KEY = "kgplm_normalization"


def wordpiece_pipeline(model, *, lowercase: bool = True, normalization: str = "nfkc+bert"):
    """A ``tokenizers.Tokenizer`` around a WordPiece ``model``: BERT's normaliser and pre-tokenizer,
    with NFKC in front for ``normalization="nfkc+bert"``."""
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers

    if normalization not in NORMALIZATIONS:
        raise ConfigurationError(f"normalization must be one of {NORMALIZATIONS}, got {normalization!r}")
    tokenizer = Tokenizer(model)
    bert = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
    )
    # NFKC: full-width → half-width, compatibility forms → canonical
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), bert]) if normalization == "nfkc+bert" else bert
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    return tokenizer


def _finish(tokenizer):
    """Add [CLS]/[SEP] templates and wrap as a transformers fast tokenizer."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    missing = [token for token in SPECIAL_TOKENS if tokenizer.token_to_id(token) is None]
    if missing:
        raise ConfigurationError(f"the vocabulary lacks the special tokens {missing}; expected all of {SPECIAL_TOKENS}")
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],
    )


def _iter_texts(corpus) -> Iterator[str]:
    from kgplm.text.corpus import read_corpus

    if isinstance(corpus, (str, os.PathLike)):
        for document in read_corpus(corpus):
            yield document.text
        return
    for item in corpus:
        if isinstance(item, os.PathLike):
            for document in read_corpus(item):
                yield document.text
        elif isinstance(item, str):
            yield item
        else:
            raise ConfigurationError(f"corpus items must be texts or file paths, got {type(item).__name__}")


def build_vocab(
    corpus: str | os.PathLike | Iterable[str],
    vocab_size: int = 21128,
    *,
    min_frequency: int = 5,
    lowercase: bool = True,
    limit_alphabet: int = 20000,
    output_dir: str | os.PathLike | None = None,
    show_progress: bool = True,
):
    """Train an in-domain WordPiece vocabulary; returns a ``PreTrainedTokenizerFast``.

    ``corpus``: a corpus file (text lines, CSV, JSON lines; see :func:`kgplm.text.read_corpus`),
    or an iterable of texts (``str``) and/or such files (``pathlib.Path``). ``vocab_size`` includes the special tokens
    ``[PAD] [UNK] [CLS] [SEP] [MASK]`` (ids 0–4). ``limit_alphabet`` caps the single characters
    kept (Chinese needs thousands). With ``output_dir`` the tokenizer is saved there
    (``save_pretrained``: ``tokenizer.json`` and config) and a ``vocab.txt`` is written beside it.

    Deterministic: the vocabulary is learnt by :func:`kgplm.text.wordpiece_trainer.learn_wordpiece`
    (BPE merges with a ``##`` prefix, every tie broken by a stated order), so the same corpus and
    settings give the same tokens with the same ids in any process and on any machine. Ids: the
    special tokens, then the single characters by code point, then the ``##`` characters by code
    point, then the merged pieces in the order they were learnt. (``tokenizers``' own WordPiece
    trainer breaks count ties in hash-map order and is not used: huggingface/tokenizers#1794.)
    """
    from tokenizers import models

    from kgplm.text.wordpiece_trainer import count_words, learn_wordpiece

    if vocab_size < len(SPECIAL_TOKENS) + 1:
        raise ConfigurationError(f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens, got {vocab_size}")
    if min_frequency < 1:
        raise ConfigurationError(f"min_frequency must be at least 1, got {min_frequency}")
    pipeline = wordpiece_pipeline(models.WordPiece(unk_token="[UNK]"), lowercase=lowercase)
    word_counts = count_words(_iter_texts(corpus), pipeline, show_progress=show_progress)
    learnt = learn_wordpiece(
        word_counts,
        vocab_size,
        special_tokens=SPECIAL_TOKENS,
        min_frequency=min_frequency,
        limit_alphabet=limit_alphabet,
        show_progress=show_progress,
    )
    tokenizer = wordpiece_pipeline(
        models.WordPiece(learnt.as_dict(), unk_token="[UNK]", max_input_chars_per_word=100), lowercase=lowercase
    )
    logger.info("trained a WordPiece vocabulary of %d pieces", tokenizer.get_vocab_size())
    fast = _finish(tokenizer)
    if output_dir is not None:
        save_tokenizer(fast, output_dir)
    return fast


def normalization_of(tokenizer) -> str:
    """``"nfkc+bert"`` or ``"bert"``: read from the tokenizer's own normaliser."""
    import json

    normalizer = json.loads(tokenizer.backend_tokenizer.to_str()).get("normalizer") or {}
    parts = normalizer.get("normalizers", [normalizer]) if normalizer.get("type") == "Sequence" else [normalizer]
    kinds = [part.get("type") for part in parts]
    if kinds == ["NFKC", "BertNormalizer"]:
        return "nfkc+bert"
    if kinds == ["BertNormalizer"]:
        return "bert"
    raise ConfigurationError(f"the tokenizer's normaliser {kinds} is neither of kgplm's {NORMALIZATIONS}")


def save_tokenizer(tokenizer, output_dir: str | os.PathLike) -> Path:
    """``save_pretrained`` plus a ``vocab.txt`` in id order (what BERT-style code reads) and the
    normalisation recorded in ``tokenizer_config.json``."""
    import json

    from kgplm._io import atomic_directory

    output_dir = Path(output_dir)
    with atomic_directory(output_dir) as temporary:
        tokenizer.save_pretrained(str(temporary))
        vocabulary = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
        (temporary / "vocab.txt").write_text("".join(f"{token}\n" for token, _ in vocabulary), encoding="utf-8")
        config_path = temporary / "tokenizer_config.json"
        config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
        config[_RECORD_KEY] = normalization_of(tokenizer)
        config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False), encoding="utf-8")
    return output_dir


def _recorded_normalization(folder: Path) -> str:
    """The normalisation recorded beside a ``vocab.txt``; ``"bert"`` (a third-party vocabulary) when none is."""
    import json

    config_path = folder / "tokenizer_config.json"
    if config_path.is_file():
        try:
            recorded = json.loads(config_path.read_text(encoding="utf-8")).get(_RECORD_KEY)
        except json.JSONDecodeError:
            recorded = None
        if recorded is not None:
            if recorded not in NORMALIZATIONS:
                raise ConfigurationError(f"{config_path}: {_RECORD_KEY} {recorded!r} is not one of {NORMALIZATIONS}")
            return recorded
    return "bert"


def load_tokenizer(path: str | os.PathLike, *, lowercase: bool = True):
    """A fast tokenizer from a saved directory (``tokenizer.json``) or a WordPiece ``vocab.txt``.

    A directory holding only ``vocab.txt`` is read as a vocabulary file: with the normalisation
    recorded in its ``tokenizer_config.json`` when kgplm saved it, else as a third-party BERT
    vocabulary (BERT's normaliser alone, the ids of ``transformers.BertTokenizer``).
    """
    from tokenizers import models

    path = Path(path)
    if path.is_dir():
        if (path / "tokenizer.json").is_file():
            from transformers import PreTrainedTokenizerFast

            return PreTrainedTokenizerFast.from_pretrained(str(path))
        path = path / "vocab.txt"
    if not path.is_file():
        raise MissingFileError(path, "tokenizer directory or vocab.txt")
    return _finish(
        wordpiece_pipeline(
            models.WordPiece.from_file(str(path), unk_token="[UNK]", max_input_chars_per_word=100),
            lowercase=lowercase,
            normalization=_recorded_normalization(path.parent),
        )
    )
