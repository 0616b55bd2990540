"""Cloze probe of factual knowledge (LAMA-style, Petroni et al. 2019), built from any KG.

A probe is a triple (h, r, t) written as a sentence with the tail masked,
``"{h}的{r}有[MASK]…[MASK]。"`` — the template that :func:`kgplm.demo.verbalize_triples` uses —
with as many ``[MASK]`` tokens as the tokenizer gives the tail name. The masked-LM head fills
every mask in one pass (argmax per position, no decoding across positions). Scores:

* ``exact``: the share of probes whose every masked token is predicted right;
* ``token``: the share of masked tokens predicted right.

Probes take triples whose tail name has 1 to ``max_answer_tokens`` tokens, at most one probe per
head entity, in a seeded order. When several tails share (h, r), the probe's gold answer is the
one written, and any of the others counts as right too (a one-to-many relation has no single
answer). Models are fed plain text (no linked mentions), as in :mod:`kgplm.evaluation.similarity`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kgplm.exceptions import ConfigurationError

__all__ = ["ClozeProbe", "build_cloze_probes", "evaluate_cloze"]


@dataclass(frozen=True)
class ClozeProbe:
    """``prefix`` + answer + ``suffix`` is the sentence; ``answers`` every acceptable tail name."""

    prefix: str
    suffix: str
    answers: tuple[str, ...]


def build_cloze_probes(store, tokenizer, *, max_probes: int = 500, max_answer_tokens: int = 4,
                       seed: int = 0) -> list[ClozeProbe]:
    """Probes from ``store``'s triples; see the module docstring."""
    if max_probes < 1 or max_answer_tokens < 1:
        raise ConfigurationError("max_probes and max_answer_tokens must be positive")
    triples = np.asarray(store.triples)
    if not len(triples):
        raise ConfigurationError("the graph has no triples to probe")
    order = np.random.default_rng(seed).permutation(len(triples))
    tails_of: dict[tuple[int, int], set[str]] = {}
    for head, relation, tail in triples.tolist():
        tails_of.setdefault((head, relation), set()).add(store.entity_name(tail))
    probes, used_heads = [], set()
    for index in order.tolist():
        head, relation, tail = (int(v) for v in triples[index])
        if head in used_heads or head == tail:
            continue
        answer = store.entity_name(tail)
        pieces = tokenizer.tokenize(answer)
        if not 1 <= len(pieces) <= max_answer_tokens or tokenizer.unk_token in pieces:
            continue
        used_heads.add(head)
        answers = (answer, *sorted(tails_of[(head, relation)] - {answer}))
        probes.append(ClozeProbe(f"{store.entity_name(head)}的{store.relation_name(relation)}有", "。", answers))
        if len(probes) == max_probes:
            break
    return probes


def evaluate_cloze(model, tokenizer, probes: Sequence[ClozeProbe], *, batch_size: int = 64,
                   device: str = "cpu") -> dict[str, float]:
    """``{"exact", "token", "probes"}`` for a model whose output has ``prediction_logits``."""
    import torch

    if not probes:
        raise ConfigurationError("no cloze probes to evaluate")
    model.eval().to(device)
    exact = token_hits = token_total = 0
    with torch.no_grad():
        for start in range(0, len(probes), batch_size):
            chunk = probes[start: start + batch_size]
            answer_ids = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(p.answers[0])) for p in chunk]
            texts = [p.prefix + tokenizer.mask_token * len(ids) + p.suffix for p, ids in zip(chunk, answer_ids)]
            encoding = tokenizer(texts, padding=True, return_tensors="pt")
            encoding = {k: v.to(device) for k, v in encoding.items()}
            logits = model(**encoding).prediction_logits  # (batch, length, vocab)
            is_mask = encoding["input_ids"] == tokenizer.mask_token_id
            for row, probe in enumerate(chunk):
                predicted = logits[row][is_mask[row]].argmax(-1).tolist()  # (masks,)
                accepted = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(a)) for a in probe.answers]
                exact += int(any(predicted == ids for ids in accepted))
                gold = answer_ids[row]
                if len(predicted) != len(gold):
                    raise ConfigurationError(f"probe {probe.prefix!r}: {len(predicted)} masks for {len(gold)} tokens")
                token_hits += sum(p == g for p, g in zip(predicted, gold))
                token_total += len(gold)
    return {"exact": exact / len(probes), "token": token_hits / token_total, "probes": len(probes)}
