"""Cloze probes from the toy graph; scoring against oracle models with hand-computed scores."""

from __future__ import annotations

import pytest
import torch

from kgplm import KGStore
from kgplm.evaluation.probing import build_cloze_probes, evaluate_cloze
from kgplm.text.tokenization import build_vocab
from tests.test_api import TOY_GRAPH


@pytest.fixture(scope="module")
def setting():
    store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    names = [store.entity_name(e) for e in range(store.num_entities)] + store.relation_names
    tokenizer = build_vocab(names * 3 + ["的有。"] * 3, 400, min_frequency=1, show_progress=False)
    return store, tokenizer


class Oracle(torch.nn.Module):
    """Predicts each probe's first answer at its masks; with ``first_only`` only the first mask is right."""

    def __init__(self, tokenizer, probes, first_only=False):
        super().__init__()
        self.tokenizer, self.first_only = tokenizer, first_only
        self.answers = [(tokenizer(p.prefix, add_special_tokens=False)["input_ids"],
                         tokenizer.convert_tokens_to_ids(tokenizer.tokenize(p.answers[0]))) for p in probes]

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        logits = torch.zeros(*input_ids.shape, len(self.tokenizer))
        for row, ids in enumerate(input_ids.tolist()):
            answer = next(a for prefix, a in self.answers if ids[1: 1 + len(prefix)] == prefix)
            masks = [i for i, t in enumerate(ids) if t == self.tokenizer.mask_token_id]
            for position, (mask, token) in enumerate(zip(masks, answer)):
                wrong = self.tokenizer.unk_token_id
                logits[row, mask, token if position == 0 or not self.first_only else wrong] = 1.0
        return type("Output", (), {"prediction_logits": logits})()


def test_probes_follow_the_template_and_collect_every_tail(setting):
    store, tokenizer = setting
    probes = build_cloze_probes(store, tokenizer, max_probes=50, max_answer_tokens=6)
    assert probes and len({p.prefix for p in probes}) == len(probes)  # one probe per head entity
    for probe in probes:
        head_name, _, relation_name = probe.prefix[:-1].partition("的")
        head = store.entity_id(head_name)
        relation = store.relation_names.index(relation_name)
        tails = {store.entity_name(int(t)) for h, r, t in store.triples.tolist() if h == head and r == relation}
        assert set(probe.answers) == tails and probe.suffix == "。"


def test_scores_against_oracles(setting):
    store, tokenizer = setting
    probes = build_cloze_probes(store, tokenizer, max_probes=50, max_answer_tokens=6)
    perfect = evaluate_cloze(Oracle(tokenizer, probes), tokenizer, probes, batch_size=3)
    assert perfect["exact"] == 1.0 and perfect["token"] == 1.0 and perfect["probes"] == len(probes)
    partial = evaluate_cloze(Oracle(tokenizer, probes, first_only=True), tokenizer, probes)
    lengths = [len(tokenizer.tokenize(p.answers[0])) for p in probes]
    assert partial["token"] == pytest.approx(len(lengths) / sum(lengths))
    assert partial["exact"] == pytest.approx(sum(n == 1 for n in lengths) / len(lengths))
