"""Text pipeline: vocabularies and tokenizers, segmentation, mention linking, corpus → examples, masking."""

from kgplm.text.alignment import char_spans_to_token_spans, char_to_word_ids
from kgplm.text.corpus import Document, build_corpus, entity_frequencies, load_corpus, read_corpus
from kgplm.text.linking import EntityLinker, Mention, normalize_for_matching
from kgplm.text.masking import Masker
from kgplm.text.segmentation import Segmenter
from kgplm.text.tokenization import build_vocab, load_tokenizer, save_tokenizer

__all__ = [
    "EntityLinker",
    "Mention",
    "Masker",
    "Segmenter",
    "Document",
    "build_vocab",
    "load_tokenizer",
    "save_tokenizer",
    "read_corpus",
    "build_corpus",
    "load_corpus",
    "entity_frequencies",
    "char_spans_to_token_spans",
    "char_to_word_ids",
    "normalize_for_matching",
]
