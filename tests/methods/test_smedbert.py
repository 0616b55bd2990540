"""SMedBERT: shapes, masks, grouped softmaxes, gradients, the MNeM–TransR identity, what reaches the
encoder (no MNeM target's neighbours, no mention's own entity through the R-GCN), save/load."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from kgplm.kg.embeddings import translation_energy
from kgplm.methods.smedbert import SmedbertForPreTraining
from kgplm.methods.smedbert.modeling import (
    GatedPositionInfusion,
    MentionNeighborHybridAttention,
    masked_neighbor_loss,
    mnem_scores,
)
from kgplm.models import load_pretrained
from kgplm.models.modules import co_neighbor_edges, mention_token_index
from tests.methods.conftest import knowledge_batch, tiny_config, toy_batch


def _model(**overrides) -> SmedbertForPreTraining:
    torch.manual_seed(0)
    return SmedbertForPreTraining(tiny_config(**overrides))


def test_output_shapes_and_all_four_losses(batch):
    output = _model()(**batch)
    assert output.prediction_logits.shape == (2, 10, 60)
    assert output.sop_logits.shape == (2, 2)
    assert output.mention_vectors.shape == (1, 16)  # the one knowledge mention
    assert set(output.losses) == {"mlm", "sop", "mnem", "mmem"}
    config = tiny_config()
    expected = (
        output.losses["mlm"]
        + output.losses["sop"]
        + config.mnem_weight * output.losses["mnem"]
        + config.mmem_weight * output.losses["mmem"]
    )
    assert torch.allclose(output.loss, expected)


@pytest.mark.parametrize(
    "overrides", [{}, {"relational_encoder": "rgcn"}, {"use_type_attention": False}, {"freeze_kg_embeddings": False}]
)
def test_gradients_reach_every_trainable_parameter(batch, overrides):
    model = _model(**overrides)
    model(**batch).loss.backward()
    missing = [
        name
        for name, p in model.named_parameters()
        if p.requires_grad and (p.grad is None or not torch.any(p.grad != 0))
    ]
    assert missing == []
    frozen = {name for name, p in model.named_parameters() if not p.requires_grad}
    if overrides.get("freeze_kg_embeddings", True):
        assert {"kg.entities", "kg.relations", "kg.projections"} <= frozen
    assert "mmem_target_embeddings" in frozen


def test_the_related_relation_is_learned_only_for_tables_with_unlinked_candidates():
    learned = {name for name, p in _model().named_parameters() if p.requires_grad}
    assert {"kg.related_relation", "kg.related_projection"} <= learned
    fixed = {name for name, p in _model(neighbor_candidates="one_hop").named_parameters() if not p.requires_grad}
    assert {"kg.related_relation", "kg.related_projection"} <= fixed


def test_neighbours_of_mnem_targets_never_reach_the_encoder(batch):
    """MNeM predicts the neighbours of mentions that got no injection: its inputs change no hidden state."""
    model = _model().eval()
    with torch.no_grad():
        before = model(**batch)
        changed = dict(
            batch, mnem_entity_ids=(batch["mnem_entity_ids"] + 7) % 24, mnem_relation_ids=torch.tensor([0, 1, 2])
        )
        after = model(**changed)
    assert torch.equal(before.last_hidden_state, after.last_hidden_state)
    assert not torch.isclose(before.losses["mnem"], after.losses["mnem"])  # the targets did change


def _shared_node_inputs(partner_neighbors=(1, 6)) -> dict[str, torch.Tensor]:
    """Sequence 0: mention A (entity 1, masked: its tokens are [MASK]) with neighbours {5, 6}.
    Sequence 1: a mention whose neighbours are ``partner_neighbors``; by default {1, 6}: A's own
    entity and a neighbour A shares with it (node 6), the path of issue 27.3."""
    generator = torch.Generator().manual_seed(3)
    input_ids = torch.randint(5, 60, (2, 10), generator=generator)
    input_ids[0, 1:3] = 4  # A is masked
    return dict(
        input_ids=input_ids,
        attention_mask=torch.ones(2, 10, dtype=torch.long),
        token_type_ids=torch.zeros(2, 10, dtype=torch.long),
        mention_batch=torch.tensor([0, 1]),
        mention_spans=torch.tensor([[1, 3], [4, 6]]),
        neighbor_mention=torch.tensor([0, 0, 1, 1]),
        neighbor_entity_ids=torch.tensor([5, 6, *partner_neighbors]),
        neighbor_relation_ids=torch.tensor([0, 1, 2, 1]),
        neighbor_directions=torch.tensor([0, 1, 0, 1]),
        neighbor_type_ids=torch.tensor([0, 1, 0, 1]),
    )


def test_the_rgcn_does_not_carry_a_masked_mentions_own_entity_into_its_tokens():
    """Changing the entity row of masked mention A (entity 1) leaves sequence 0 unchanged although a
    batch partner has entity 1 among its neighbours and shares neighbour 6 with A; it does change
    the partner (for which entity 1 is a legitimate neighbour)."""
    model = _model(relational_encoder="rgcn").eval()
    inputs = _shared_node_inputs()
    with torch.no_grad():
        model.kg.entities.normal_()
        before = model(**inputs).last_hidden_state
        model.kg.entities[1] = torch.randn(16)
        after = model(**inputs).last_hidden_state
    assert torch.equal(before[0], after[0])
    assert not torch.allclose(before[1], after[1])


@pytest.mark.parametrize("overrides", [{}, {"relational_encoder": "rgcn"}])
def test_the_same_example_in_two_batches_gives_the_same_hidden_states(overrides):
    """Sequence 0 beside a partner that shares a neighbour entity with it, then beside one that
    shares nothing: sequence 0's hidden states are the same (as at fine-tuning: every mention
    injected, the model computing the graph itself)."""
    model = _model(**overrides).eval()
    with torch.no_grad():
        model.kg.entities.normal_()
        coupled = model(**_shared_node_inputs((1, 6))).last_hidden_state
        apart = model(**_shared_node_inputs((7, 8))).last_hidden_state
    torch.testing.assert_close(coupled[0], apart[0], rtol=0, atol=1e-6)
    assert not torch.allclose(coupled[1], apart[1])  # the partners did differ


def test_co_neighbor_edges_by_hand():
    source, target = co_neighbor_edges(torch.tensor([1, 0, 1, 1, 2]))
    pairs = sorted(zip(source.tolist(), target.tolist()))
    assert pairs == [(0, 2), (0, 3), (2, 0), (2, 3), (3, 0), (3, 2)]


def test_a_batch_without_targets_has_no_loss_and_no_nan(batch):
    empty = dict(
        batch,
        labels=torch.full_like(batch["labels"], -100),
        sentence_order_label=torch.tensor([-100, -100]),
        mention_masked=torch.tensor([False]),
        mnem_edge_mention=torch.zeros(0, dtype=torch.long),
        mnem_entity_ids=torch.zeros(0, dtype=torch.long),
        mnem_relation_ids=torch.zeros(0, dtype=torch.long),
        mnem_directions=torch.zeros(0, dtype=torch.long),
        mnem_negative_ids=torch.zeros(0, 4, dtype=torch.long),
        mnem_log_q=torch.zeros(0, 5),
    )
    output = _model()(**empty)
    assert output.loss is None and output.losses == {}
    only_mlm = dict(empty, labels=batch["labels"])
    output = _model()(**only_mlm)
    assert set(output.losses) == {"mlm"} and torch.isfinite(output.loss)


def test_tokens_outside_mentions_are_unchanged_by_the_infusion():
    torch.manual_seed(0)
    config = tiny_config()
    infusion = GatedPositionInfusion(config)
    hidden = torch.randn(2, 10, 32)
    inputs = knowledge_batch()
    token_mention, token_batch, token_position = mention_token_index(inputs["mention_batch"], inputs["mention_spans"])
    updated = infusion(hidden, torch.randn(3, 16), torch.randn(3, 16), token_mention, token_batch, token_position)
    inside = torch.zeros(2, 10, dtype=torch.bool)
    inside[token_batch, token_position] = True
    assert int(inside.sum()) == 2 + 1 + 3
    assert torch.equal(updated[~inside], hidden[~inside])
    assert not torch.isclose(updated[inside], hidden[inside]).all(dim=-1).any()


def test_mention_token_index_by_hand():
    token_mention, token_batch, token_position = mention_token_index(
        torch.tensor([0, 0, 1]), torch.tensor([[1, 3], [4, 5], [2, 5]])
    )
    assert token_mention.tolist() == [0, 0, 1, 2, 2, 2]
    assert token_batch.tolist() == [0, 0, 0, 1, 1, 1]
    assert token_position.tolist() == [1, 2, 4, 2, 3, 4]


def _attention_inputs():
    torch.manual_seed(1)
    mention_vectors = torch.randn(3, 16)
    neighbor_vectors = torch.randn(6, 16)
    edge_mention = torch.tensor([0, 0, 0, 1, 2, 2])
    edge_type = torch.tensor([0, 1, 2, 0, 0, 1])  # 2 = the untyped bucket
    return mention_vectors, neighbor_vectors, edge_mention, edge_type


def test_grouped_softmaxes_sum_to_one_and_match_a_padded_computation():
    attention = MentionNeighborHybridAttention(tiny_config())
    mention_vectors, neighbor_vectors, edge_mention, edge_type = _attention_inputs()
    summary = attention(mention_vectors, neighbor_vectors, edge_mention, edge_type, num_types=2)
    beta = attention.node_attention.last_attention
    assert torch.allclose(torch.zeros(3).index_add(0, edge_mention, beta), torch.ones(3))

    # independent computation, one mention at a time, with explicit loops over types
    types = attention.type_attention
    nodes = attention.node_attention
    for mention in range(3):
        rows = (edge_mention == mention).nonzero().ravel()
        present = sorted(set(edge_type[rows].tolist()))
        h_tau = {t: neighbor_vectors[rows[edge_type[rows] == t]].sum(0) for t in present}
        raw = torch.stack(
            [
                types.score(
                    torch.tanh(types.mention_transform(mention_vectors[mention]) + types.type_transform(h_tau[t]))
                ).squeeze()
                for t in present
            ]
        )
        alpha = dict(zip(present, torch.softmax(raw, 0)))
        assert math.isclose(float(sum(alpha.values())), 1.0, rel_tol=1e-6)
        scores = torch.stack(
            [
                alpha[int(edge_type[r])]
                * (nodes.query(mention_vectors[mention]) @ nodes.key(neighbor_vectors[r]))
                / 4.0
                for r in rows
            ]
        )
        weights = torch.softmax(scores, 0)
        assert torch.allclose(beta[rows], weights, atol=1e-6)
        hat = (weights.unsqueeze(1) * nodes.value(neighbor_vectors[rows])).sum(0)
        expected = attention.output_norm(hat + attention.contract(F.gelu(attention.expand(hat))))
        assert torch.allclose(summary[mention], expected, atol=1e-5)


def test_without_hybrid_attention_the_summary_is_the_neighbour_mean():
    attention = MentionNeighborHybridAttention(tiny_config(use_hybrid_attention=False))
    mention_vectors, neighbor_vectors, edge_mention, edge_type = _attention_inputs()
    summary = attention(mention_vectors, neighbor_vectors, edge_mention, edge_type, num_types=2)
    mean = neighbor_vectors[:3].mean(0)
    assert torch.allclose(
        summary[0], attention.output_norm(mean + attention.contract(F.gelu(attention.expand(mean)))), atol=1e-6
    )


def test_mnem_score_equals_the_transr_energy_identity_when_norms_are_one():
    """Eq. 17: with ‖h M_r + r‖ = ‖t M_r‖ = 1, f_s = λ (1 − f_tr² / 2), f_tr the TransR energy."""
    torch.manual_seed(2)
    dim = 8
    projection, _ = torch.linalg.qr(torch.randn(dim, dim))  # orthogonal M_r
    unit = F.normalize(torch.randn(dim), dim=0)
    orthogonal = torch.randn(dim)
    orthogonal = 0.3 * F.normalize(orthogonal - (orthogonal @ unit) * unit, dim=0)
    relation = 0.5 * unit + orthogonal  # ‖u − r‖ < 1: the TransR norm constraint is inactive
    head = (unit - relation) @ projection.T  # head M_r = u − r, so head M_r + r = u
    tail = F.normalize(torch.randn(dim), dim=0) @ projection.T  # ‖tail M_r‖ = 1
    score = mnem_scores(head[None], relation[None], projection[None], tail[None, None], torch.tensor([0]), 10.0)
    energy = translation_energy(head[None], relation[None], tail[None], 2, matrices=projection[None], group_sizes=[1])
    assert torch.allclose(score[0, 0], 10.0 * (1 - energy[0] ** 2 / 2), atol=1e-5)
    # when e_m is the tail (direction 1) the relation is subtracted: h_mf M_r − h_r
    reverse = mnem_scores(head[None], relation[None], projection[None], tail[None, None], torch.tensor([1]), 10.0)
    expected = 10.0 * F.cosine_similarity(head @ projection - relation, tail @ projection, dim=0)
    assert torch.allclose(reverse[0, 0], expected, atol=1e-6)


def test_masked_neighbor_loss_by_hand_and_accidental_hits_removed():
    scores = torch.tensor([[2.0, 1.0, 0.5], [0.0, 3.0, 1.0]])
    log_q = torch.tensor([[-1.0, -2.0, -0.5], [-1.0, -1.0, -3.0]])
    ids = torch.tensor([[7, 8, 9], [5, 5, 6]])  # row 2: the first negative is the positive itself
    loss = masked_neighbor_loss(scores, log_q, ids)
    first = -(3.0 - math.log(math.exp(3.0) + math.exp(3.0) + math.exp(1.0)))
    second = -(1.0 - math.log(math.exp(1.0) + math.exp(4.0)))
    assert math.isclose(float(loss), (first + second) / 2, rel_tol=1e-6)


def test_knowledge_losses_and_sop_can_be_switched_off(batch):
    assert set(_model(use_knowledge_losses=False)(**batch).losses) == {"mlm", "sop"}
    assert set(_model(use_sop=False, use_knowledge_losses=False)(**batch).losses) == {"mlm"}


def test_mmem_target_is_frozen_at_the_start_of_pretraining(batch):
    model = _model()
    snapshot = model.mmem_target_embeddings.detach().clone()
    assert torch.equal(snapshot, model.bert.embeddings.word_embeddings.weight)
    optimizer = torch.optim.SGD(model.trainable_parameters(), lr=1.0)
    model(**batch).loss.backward()
    optimizer.step()
    assert not torch.equal(model.bert.embeddings.word_embeddings.weight, snapshot)
    assert torch.equal(model.mmem_target_embeddings, snapshot)


def test_no_mentions_is_plain_bert_plus_heads(batch):
    plain = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids", "labels", "sentence_order_label")}
    output = _model()(**plain)
    assert set(output.losses) == {"mlm", "sop"}


def test_without_mentions_the_fine_tuning_encoder_is_plain_bert():
    """The "no knowledge at fine-tuning" row: with no linked mentions SMedBERT's encoder pass equals
    transformers' BertModel with the same weights (the knowledge module is skipped, not zeroed in)."""
    from transformers import BertModel

    from kgplm.models import KgplmForFineTuning

    config = tiny_config(task_kind="classification", task_name="cmedic", label_names=["a", "b"])
    torch.manual_seed(0)
    network = KgplmForFineTuning(config).eval()
    reference = BertModel(config, add_pooling_layer=True).eval()
    reference.load_state_dict(
        {name[len("bert.") :]: tensor for name, tensor in network.state_dict().items() if name.startswith("bert.")}
    )
    plain = {k: v for k, v in knowledge_batch().items() if k in ("input_ids", "attention_mask", "token_type_ids")}
    with torch.no_grad():
        ours = network(**plain).last_hidden_state
        expected = reference(**plain).last_hidden_state
        with_mentions = network(**knowledge_batch()).last_hidden_state
    assert torch.allclose(ours, expected, atol=1e-6)
    assert not torch.allclose(with_mentions, expected, atol=1e-4)  # the comparison is not vacuous


def test_save_load_gives_identical_outputs(tmp_path, batch):
    model = _model(relational_encoder="rgcn").eval()
    with torch.no_grad():
        model.kg.entities.normal_()  # as if loaded from KG embeddings
        before = model(**batch)
    model.save_pretrained(tmp_path)
    loaded = load_pretrained(tmp_path).eval()
    assert isinstance(loaded, SmedbertForPreTraining)
    with torch.no_grad():
        after = loaded(**batch)
    saved, restored = model.state_dict(), loaded.state_dict()
    assert saved.keys() == restored.keys() and all(torch.equal(saved[k], restored[k]) for k in saved)
    # equal weights; outputs may differ in the last bit because loaded storage has another memory
    # alignment, which changes how vectorised kernels sum
    torch.testing.assert_close(after.prediction_logits, before.prediction_logits, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(after.loss, before.loss, rtol=1e-6, atol=1e-6)
    assert loaded.cls.predictions.decoder.weight.data_ptr() == loaded.bert.embeddings.word_embeddings.weight.data_ptr()


def test_bad_knowledge_configuration_fails_early():
    from kgplm.exceptions import ConfigurationError

    with pytest.raises(ConfigurationError, match="knowledge_layer"):
        SmedbertForPreTraining(tiny_config(knowledge_layer=5))
    with pytest.raises(ConfigurationError, match="knowledge_layer"):
        SmedbertForPreTraining(tiny_config(knowledge_layer=-1))
    with pytest.raises(ConfigurationError, match="relational_encoder"):
        SmedbertForPreTraining(tiny_config(relational_encoder="gat"))
    with pytest.raises(ConfigurationError, match="num_entities"):
        SmedbertForPreTraining(tiny_config(num_entities=0))


def test_knowledge_layer_default_is_two_below_the_top():
    assert tiny_config().fusion_layer == 0
    assert tiny_config(num_hidden_layers=12).fusion_layer == 10
    batch = toy_batch()
    assert _model(knowledge_layer=2)(**batch).loss.isfinite()


def test_a_from_scratch_encoder_is_warned_that_the_mmem_target_is_random(caplog):
    from kgplm.methods import MethodContext, get

    model = _model()
    context = MethodContext(config=model.config, tokenizer=None, store=None, masking="whole_entity", seed=0)
    get("smedbert").prepare_model(model, context)
    assert "MMeM target" in caplog.text and "random" in caplog.text
    caplog.clear()
    get("smedbert").prepare_model(
        model,
        MethodContext(
            config=model.config, tokenizer=None, store=None, masking="whole_entity", seed=0, text_model_dir="bert-dir"
        ),
    )
    assert "MMeM target" not in caplog.text
