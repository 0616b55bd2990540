"""The cloze probe for the replication table: an adapter over :mod:`kgplm.evaluation.probing`.

The table needs, per probe query, a model's hit and the query's group. This adapter builds the probe
with :func:`build_probe` (templates in the form the pre-training text states facts, every answer and
alias, all answer lengths decoded with a beam of 5) and adds:

* **seen / unseen**: a query is *seen* when one line of the pre-training text contains the name of
  its given entity and one of its accepted answer names; *unseen* queries test knowledge the text did
  not state. (The replication rows are trained without ``exclude_triples``, so no query is held out
  by construction; ``experiments/probe.py`` shows the held-out design.)
* **hard / easy** (:func:`reference_scores`): *easy* queries are those the model-free baseline answers
  (the slot's most frequent fillers among the *other* facts, 5 per answer length); the table's probe
  columns are the **hard** queries, seen and unseen, with the easy ones reported apart.
* **chance** per query: the probability that 5 entity names per answer length drawn uniformly hit.
* **type 1** (Yuan et al. 2021 §4.6.4: an answer occurs in the query), for the notes.
* **per-query hits** (:func:`evaluate_probe`; a query whose answers the vocabulary cannot write
  counts as a miss), so the bootstrap can resample queries.
* **fingerprint**: a hash of the queries, for the cache keys of the outcomes.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

__all__ = ["HeldOutProbe"]


class HeldOutProbe:
    """At most ``max_probes`` queries from ``store`` for ``tokenizer``, split by whether ``corpus_lines``
    state them and whether the model-free baseline answers them."""

    def __init__(self, store, tokenizer, corpus_lines, *, max_probes: int = 500, seed: int = 0) -> None:
        from kgplm.evaluation.probing import Probe, answer_in_query, build_probe, reference_scores

        self.tokenizer = tokenizer
        probe = build_probe(store, queries_per_relation=10, held_out_fraction=0.0, seed=seed)
        keep = np.sort(np.random.default_rng(seed).permutation(len(probe.queries))[:max_probes])
        self.probe = Probe([probe.queries[i] for i in keep], probe.exclude_from_training, probe.settings)
        lines = list(corpus_lines)
        self.seen = np.array(
            [
                self._stated(store.entity_name(store.entity_id(query.known)), query.answer_names, lines)
                for query in self.probe.queries
            ],
            dtype=bool,
        )
        references = reference_scores(self.probe, store, tokenizer)
        self.baseline_hits = np.array([bool(hit) for hit in references["baseline"]], dtype=bool)
        self.hard = ~self.baseline_hits
        self.chance = np.array([hit or 0.0 for hit in references["chance"]], dtype=float)
        self.type1 = np.array([answer_in_query(query) for query in self.probe.queries], dtype=bool)
        queries = json.dumps(
            [[q.relation, q.direction, q.prefix, q.suffix, list(q.answer_names)] for q in self.probe.queries],
            ensure_ascii=False,
        )
        self.fingerprint = hashlib.sha1(queries.encode()).hexdigest()[:12]

    @staticmethod
    def _stated(known: str, answers, lines) -> bool:
        return any(known in line and any(answer in line for answer in answers) for line in lines)

    def hits(self, model, *, device: str = "cpu") -> np.ndarray | None:
        """Per-query hits of a model with a masked-LM head; ``None`` for a model without one (an
        ELECTRA discriminator's ``prediction_logits`` are per-token RTD scores, not a vocabulary)."""
        import torch

        from kgplm.evaluation.probing import evaluate_probe

        encoding = self.tokenizer(["探针"], return_tensors="pt")
        with torch.no_grad():
            output = model.eval().to(device)(**{k: v.to(device) for k, v in encoding.items()})
        logits = getattr(output, "prediction_logits", None)
        if logits is None or logits.dim() != 3:  # no MLM head, or per-token scores (ELECTRA's discriminator)
            return None
        return np.array(
            [bool(hit) for hit in evaluate_probe(model, self.tokenizer, self.probe, device=device)], dtype=bool
        )
