"""The held-out cloze probe for the replication table: an adapter over :mod:`kgplm.evaluation.probing`.

The probe API on ``main`` (``build_cloze_probes`` / ``evaluate_cloze``) scores all probes together
and does not know the pre-training text. This adapter (to be replaced by the held-out probe API when
that lands in :mod:`kgplm.evaluation.probing`) adds what the table needs:

* **seen / unseen**: a probe (h, r, t) is *seen* when one line of the pre-training text contains
  the head's name and one of the accepted answers (the fact, or the two names together, was in the
  pre-training text); *unseen* probes test knowledge the text did not state.
* **per-probe hits** (exact match of every masked token, ``evaluate_cloze``'s ``exact``), one
  probe at a time, so the paired bootstrap can resample probes.
* **a model-free baseline**: for relation r and as many masks as the probe has, predict the tail
  name most frequent among r's triples (the probe's own head's triples left out); it uses only
  graph statistics and the mask count, which every model also sees.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

__all__ = ["HeldOutProbe"]


class HeldOutProbe:
    """Probes from ``store`` for ``tokenizer``, split by whether ``corpus_lines`` state them."""

    def __init__(self, store, tokenizer, corpus_lines, *, max_probes: int = 500, seed: int = 0) -> None:
        from kgplm.evaluation.probing import build_cloze_probes

        self.tokenizer = tokenizer
        self.probes = build_cloze_probes(store, tokenizer, max_probes=max_probes, seed=seed)
        triples = np.asarray(store.triples)
        by_prefix = {p.prefix: p for p in self.probes}
        facts = {}  # probe prefix -> (head, relation)
        for head, relation, _ in triples.tolist():
            prefix = f"{store.entity_name(head)}的{store.relation_name(relation)}有"
            if prefix in by_prefix:
                facts.setdefault(prefix, (head, relation))
        self.seen = np.array([self._stated(store.entity_name(facts[p.prefix][0]), p.answers, corpus_lines)
                              for p in self.probes], dtype=bool)
        self.baseline_hits = self._baseline(store, triples, facts)

    @staticmethod
    def _stated(head: str, answers, lines) -> bool:
        return any(head in line and any(answer in line for answer in answers) for line in lines)

    def _baseline(self, store, triples: np.ndarray, facts: dict) -> np.ndarray:
        relations = {relation for _, relation in facts.values()}
        tails: dict[tuple[int, int], Counter] = {}  # (relation, answer length) -> tail name counts
        lengths: dict[str, int] = {}
        for head, relation, tail in triples.tolist():
            if relation not in relations:
                continue
            name = store.entity_name(tail)
            if name not in lengths:
                lengths[name] = len(self.tokenizer.tokenize(name))
            tails.setdefault((relation, lengths[name]), Counter())[name] += 1
        hits = np.zeros(len(self.probes), dtype=bool)
        for index, probe in enumerate(self.probes):
            head, relation = facts[probe.prefix]
            own = Counter(store.entity_name(t) for h, r, t in triples[triples[:, 0] == head].tolist() if r == relation)
            counts = tails.get((relation, len(self.tokenizer.tokenize(probe.answers[0]))), Counter())
            best = max(((count - own[name], name) for name, count in counts.most_common(len(own) + 1)),
                       default=(0, None), key=lambda pair: pair[0])
            hits[index] = best[0] > 0 and best[1] in probe.answers
        return hits

    def hits(self, model, *, device: str = "cpu") -> np.ndarray | None:
        """Per-probe exact hits of a model with a masked-LM head; ``None`` for a model without one."""
        import torch

        from kgplm.evaluation.probing import evaluate_cloze

        encoding = self.tokenizer(["探针"], return_tensors="pt")
        with torch.no_grad():
            output = model.eval().to(device)(**{k: v.to(device) for k, v in encoding.items()})
        if getattr(output, "prediction_logits", None) is None:
            return None
        return np.array([evaluate_cloze(model, self.tokenizer, [probe], device=device)["exact"] == 1.0
                         for probe in self.probes], dtype=bool)
