"""Fine-tuning heads and KgplmForFineTuning: shapes, loss decreases, knowledge module active, round-trips."""

from __future__ import annotations

import math

import pytest
import torch

from kgplm.exceptions import ConfigurationError
from kgplm.methods.mlm import MlmConfig
from kgplm.methods.smedbert import SmedbertForPreTraining
from kgplm.methods.smedbert.modeling import KNOWLEDGE_INPUTS
from kgplm.models import TINY_TEXT_ENCODER, KgplmForFineTuning, load_pretrained
from kgplm.models.heads import CandidateRankingHead, PairwiseRankingHead, TripleExtractionHead, span_mean
from tests.methods.conftest import knowledge_batch, tiny_config


def mlm_config(**fields) -> MlmConfig:
    return MlmConfig(vocab_size=60, **TINY_TEXT_ENCODER, **fields)


LABELS = {
    "ner": ["O", "B-a", "I-a", "B-b", "I-b"],
    "nested_ner": ["O", "B-a", "I-a"],
    "classification": ["x", "y", "z"],
    "pair": ["0", "1"],
    "relation": ["none", "cause", "treat"],
    "qa_ranking": None,
    "graded_ranking": None,
    "relation_triples": ["<no relation>", "cause", "treat"],
}


def task_batch(kind: str, generator: torch.Generator) -> dict[str, torch.Tensor]:
    batch, length = 4, 9
    inputs = {
        "input_ids": torch.randint(5, 60, (batch, length), generator=generator),
        "attention_mask": torch.ones(batch, length, dtype=torch.long),
        "token_type_ids": torch.zeros(batch, length, dtype=torch.long),
    }
    if kind == "ner":
        inputs["labels"] = torch.randint(0, 5, (batch, length), generator=generator)
        inputs["labels"][:, 0] = -100
    elif kind == "nested_ner":
        inputs["labels"] = torch.randint(0, 3, (batch, length, 2), generator=generator)
    elif kind == "qa_ranking":
        inputs["candidate_group"] = torch.tensor([0, 0, 0, 1])
        inputs["labels"] = torch.tensor([0, 1, 0, 1])
    elif kind == "graded_ranking":
        inputs["candidate_group"] = torch.tensor([0, 0, 0, 1])
        inputs["labels"] = torch.tensor([2, 0, 1, 3])
    elif kind == "relation_triples":
        inputs["labels"] = torch.randint(0, 3, (batch, length), generator=generator)
        inputs["entity_pairs"] = torch.tensor([[0, 1, 3, 4, 6], [0, 4, 6, 1, 3], [2, 2, 3, 5, 9], [3, 1, 2, 2, 3]])
        inputs["pair_labels"] = torch.tensor([1, 0, 2, 0])
    else:
        inputs["labels"] = torch.randint(0, len(LABELS[kind]), (batch,), generator=generator)
    if kind == "relation":
        inputs["head_spans"] = torch.tensor([[1, 3], [2, 3], [1, 2], [4, 6]])
        inputs["tail_spans"] = torch.tensor([[5, 6], [6, 9], [3, 5], [7, 8]])
    return inputs


EXPECTED_SHAPES = {
    "ner": (4, 9, 5),
    "nested_ner": (4, 9, 2, 3),
    "classification": (4, 3),
    "pair": (4, 2),
    "relation": (4, 3),
    "qa_ranking": (4,),
    "graded_ranking": (4,),
    "relation_triples": (4, 9, 3),
}


@pytest.mark.parametrize("kind", list(LABELS))
def test_each_head_has_its_shape_and_fits_a_tiny_batch(kind):
    torch.manual_seed(0)
    model = KgplmForFineTuning(mlm_config(task_kind=kind, label_names=LABELS[kind]))
    inputs = task_batch(kind, torch.Generator().manual_seed(1))
    output = model(**inputs)
    assert tuple(output.logits.shape) == EXPECTED_SHAPES[kind]
    if kind == "relation_triples":
        assert tuple(output.pair_logits.shape) == (4, 3)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    first = output.loss.item()
    model.train()
    for _ in range(40):
        loss = model(**inputs).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.5 * first, (first, loss.item())


def test_knowledge_module_is_used_and_trained_when_fine_tuning_smedbert():
    torch.manual_seed(0)
    model = KgplmForFineTuning(tiny_config(task_kind="classification", label_names=["a", "b"]))
    batch = knowledge_batch()
    knowledge = {key: batch[key] for key in KNOWLEDGE_INPUTS}
    inputs = {
        "input_ids": batch["input_ids"],
        "attention_mask": batch["attention_mask"],
        "token_type_ids": batch["token_type_ids"],
        "labels": torch.tensor([0, 1]),
    }
    model.eval()
    with_knowledge = model(**inputs, **knowledge)
    without = model(**inputs)
    assert not torch.allclose(with_knowledge.logits, without.logits)
    model.train()
    model(**inputs, **knowledge).loss.backward()
    for name in ("hybrid_attention", "infusion"):
        grads = [p.grad for n, p in model.named_parameters() if n.startswith(name) and p.requires_grad]
        assert grads and all(g is not None for g in grads), name
        assert any(g.abs().sum() > 0 for g in grads), name


def test_loads_a_pretraining_checkpoint_and_round_trips(tmp_path):
    torch.manual_seed(0)
    pretrained = SmedbertForPreTraining(tiny_config()).eval()
    pretrained.save_pretrained(tmp_path / "pre")
    batch = knowledge_batch()
    config = tiny_config(task_kind="ner", label_names=LABELS["ner"])
    model = KgplmForFineTuning.from_pretrained(tmp_path / "pre", config=config).eval()
    knowledge = {key: batch[key] for key in KNOWLEDGE_INPUTS}
    common = {
        "input_ids": batch["input_ids"],
        "attention_mask": batch["attention_mask"],
        "token_type_ids": batch["token_type_ids"],
    }
    # the encoder (knowledge module included) is the pre-trained one
    expected = pretrained(**common, **knowledge).last_hidden_state
    assert torch.allclose(model(**common, **knowledge).last_hidden_state, expected, atol=1e-6)
    model.save_pretrained(tmp_path / "fine")
    reloaded = load_pretrained(tmp_path / "fine").eval()
    assert isinstance(reloaded, KgplmForFineTuning) and reloaded.config.label_names == LABELS["ner"]
    assert torch.equal(reloaded(**common, **knowledge).logits, model(**common, **knowledge).logits)


def first_feature_scorer(head):
    """``head`` scoring a candidate by its first feature; the pooled features of five candidates."""
    with torch.no_grad():
        head.scorer.weight.copy_(torch.tensor([[1.0, 0.0]]))
        head.scorer.bias.zero_()
    return head, torch.tensor([[0.0, 0], [1.0, 0], [2.0, 0], [0.5, 0], [0.0, 0]])


def test_ranking_loss_by_hand():
    head, pooled = first_feature_scorer(CandidateRankingHead(hidden_size=2, dropout=0.0))
    scores, loss = head(pooled, torch.tensor([3, 3, 3, 8, 9]), torch.tensor([0, 1, 1, 1, 0]))
    # question 3: −(log softmax(0,1,2)[1] + log softmax(0,1,2)[2]) / 2; question 8 alone: −log 1 = 0; 9 has no answer
    log_z = math.log(1 + math.e + math.e**2)
    expected = (((log_z - 1) + (log_z - 2)) / 2 + 0.0) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_span_mean_and_bad_configuration():
    hidden = torch.arange(12.0).view(1, 4, 3)
    assert torch.equal(span_mean(hidden, torch.tensor([[1, 3]])), hidden[0, 1:3].mean(0, keepdim=True))
    with pytest.raises(ConfigurationError, match="task_kind"):
        KgplmForFineTuning(mlm_config(task_kind="translation", label_names=["a"]))
    with pytest.raises(ConfigurationError, match="label_names"):
        KgplmForFineTuning(mlm_config(task_kind="ner"))
    with pytest.raises(ConfigurationError, match="unexpected inputs"):
        KgplmForFineTuning(mlm_config(task_kind="ner", label_names=["O"]))(
            input_ids=torch.ones(1, 3, dtype=torch.long), mention_spans=torch.zeros(0, 2, dtype=torch.long)
        )


def test_pairwise_ranking_loss_by_hand():
    head, pooled = first_feature_scorer(PairwiseRankingHead(hidden_size=2, dropout=0.0))
    scores, loss = head(pooled, torch.tensor([3, 3, 3, 8, 8]), torch.tensor([2, 0, 1, 1, 1]))
    # group 3: pairs (0 over 1), (0 over 2), (2 over 1); group 8: tied grades, no pair
    softplus = lambda x: math.log1p(math.exp(x))  # noqa: E731
    expected = (softplus(1 - 0) + softplus(2 - 0) + softplus(1 - 2)) / 3
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert head(pooled[3:], torch.tensor([8, 8]), torch.tensor([1, 1]))[1].item() == 0.0


def test_triple_head_pools_each_pair_from_its_own_row():
    torch.manual_seed(0)
    head = TripleExtractionHead(hidden_size=3, num_predicates=2, dropout=0.0, num_tags=3)
    hidden = torch.randn(2, 5, 3)
    pairs = torch.tensor([[1, 0, 2, 3, 5]])
    subject, obj = hidden[1, 0:2].mean(0), hidden[1, 3:5].mean(0)
    expected = head.pair_classifier(torch.cat([subject, obj, subject * obj]))
    assert torch.allclose(head.classify_pairs(hidden, pairs)[0], expected)
