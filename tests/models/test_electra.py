"""The ELECTRA core: generator size and shared embeddings, inverse-CDF sampling, RTD labels, no gradient
from the discriminator's losses into the generator, collator uniforms per example, D is what fine-tuning loads."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy import stats

from kgplm.models import TINY_TEXT_ENCODER, KgplmForFineTuning
from kgplm.models.electra import (
    ElectraConfig,
    KgplmForReplacedTokenDetection,
    sample_distinct_tokens,
    sample_tokens,
)
from kgplm.models.electra_batching import ElectraCollator
from kgplm.text.masking import Masker

VOCAB, PAD, UNK, CLS, SEP, MASK = 60, 0, 1, 2, 3, 4
NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}


def tiny_electra(**overrides) -> KgplmForReplacedTokenDetection:
    torch.manual_seed(0)
    return KgplmForReplacedTokenDetection(
        ElectraConfig(vocab_size=VOCAB, **TINY_TEXT_ENCODER, **NO_DROPOUT, **overrides)
    )


def masked_batch(seed: int = 0, rows: int = 3, length: int = 12):
    generator = torch.Generator().manual_seed(seed)
    original = torch.randint(5, VOCAB, (rows, length), generator=generator)
    original[:, 0], original[:, -1] = CLS, SEP
    labels = torch.full_like(original, -100)
    labels[:, 2:5] = original[:, 2:5]
    labels[0, 7] = original[0, 7]
    masked = original.clone()
    masked[labels >= 0] = MASK
    attention = torch.ones_like(original)
    attention[-1, -3:] = 0
    count = int((labels >= 0).sum())
    return dict(
        input_ids=masked,
        attention_mask=attention,
        token_type_ids=torch.zeros_like(original),
        labels=labels,
        replacement_uniforms=torch.rand(count, generator=generator),
    ), original


def test_the_generator_is_a_third_of_the_discriminator_and_uses_its_embeddings():
    base = ElectraConfig(vocab_size=VOCAB, hidden_size=768, num_attention_heads=12, intermediate_size=3072)
    sizes = base.generator_config()
    assert (sizes.hidden_size, sizes.num_attention_heads, sizes.intermediate_size) == (256, 4, 1024)  # ELECTRA-base
    assert sizes.num_hidden_layers == base.num_hidden_layers
    model = tiny_electra()
    names = [name for name, _ in model.named_parameters()]
    assert not [n for n in names if n.startswith("generator.") and "embeddings." in n and "project" not in n]
    # G reads D's word embeddings at its input and its output: changing them changes G's logits
    batch, _ = masked_batch()
    masked = batch["labels"] >= 0
    with torch.no_grad():
        embeddings = model.bert.embeddings(input_ids=batch["input_ids"])
        before = model.generator(
            embeddings, batch["attention_mask"], masked, model.bert.embeddings.word_embeddings.weight
        )
        model.bert.embeddings.word_embeddings.weight[7] += 1.0
        embeddings = model.bert.embeddings(input_ids=batch["input_ids"])
        after = model.generator(
            embeddings, batch["attention_mask"], masked, model.bert.embeddings.word_embeddings.weight
        )
    assert not torch.allclose(before[:, 7], after[:, 7])


def test_inverse_cdf_draws_follow_the_softmax():
    logits = torch.tensor([2.0, 0.5, -1.0, 1.0, 0.0])
    n = 40_000
    uniforms = torch.from_numpy(np.random.default_rng(0).random(n, dtype=np.float32))
    drawn = sample_tokens(logits.expand(n, -1), uniforms)
    observed = np.bincount(drawn.numpy(), minlength=5)
    expected = torch.softmax(logits.double(), -1).numpy() * n
    assert stats.chisquare(observed, expected).pvalue > 1e-3


def test_draws_without_replacement_have_the_sequential_distribution_and_skip_exclusions():
    """Second draw of two without replacement, excluding token 4: P(j) = Σ_{i≠j} p_i p_j / (1 − p_i)."""
    logits = torch.tensor([1.5, 0.0, -0.5, 1.0, 3.0])
    n = 40_000
    rng = np.random.default_rng(1)
    uniforms = torch.from_numpy(rng.random((n, 2), dtype=np.float32))
    excluded = torch.full((n, 1), 4)
    drawn = sample_distinct_tokens(logits.expand(n, -1), uniforms, excluded)
    assert (drawn[:, 0] != drawn[:, 1]).all() and not (drawn == 4).any()
    p = torch.softmax(logits[:4], -1).double().numpy()  # renormalised without token 4
    second = np.array([sum(p[i] * p[j] / (1 - p[i]) for i in range(4) if i != j) for j in range(4)])
    observed = np.bincount(drawn[:, 1].numpy(), minlength=5)[:4]
    assert stats.chisquare(observed, second / second.sum() * n).pvalue > 1e-3


def test_a_row_whose_mass_underflows_still_draws_an_allowed_token():
    logits = torch.tensor([[0.0, -1e4, -1e4, -1e4, -1e4]]).expand(200, -1)
    uniforms = torch.linspace(0, 0.999, 200)
    drawn = sample_distinct_tokens(logits, uniforms.unsqueeze(1), torch.zeros(200, 1, dtype=torch.long))
    assert drawn.min() >= 1 and set(drawn.flatten().tolist()) == {1, 2, 3, 4}  # uniform among the allowed
    assert (
        sample_tokens(logits, torch.full((200,), 0.9999999)) == 0
    ).all()  # u·total rounding to the top stays in mass


def test_rtd_labels_match_the_corruption_and_a_sampled_original_counts_as_original():
    model = tiny_electra().eval()
    batch, original = masked_batch()
    masked = batch["labels"] >= 0
    with torch.no_grad():
        # make G sure of token 9 at every masked position; position (1, 3) holds 9 originally
        model.generator.bias[9] = 1e3
        original[1, 3] = batch["labels"][1, 3] = 9
        corruption = model.corrupt(
            batch["input_ids"],
            batch["attention_mask"],
            batch["token_type_ids"],
            batch["labels"],
            batch["replacement_uniforms"],
        )
        output = model(**batch)
    assert torch.equal(corruption.original_ids, original)
    assert (corruption.corrupted_ids[masked] == 9).all() and torch.equal(
        corruption.corrupted_ids[~masked], original[~masked]
    )
    assert torch.equal(corruption.replaced, corruption.corrupted_ids != original)
    assert not corruption.replaced[1, 3] and corruption.replaced[0, 2] == (original[0, 2] != 9)
    real = batch["attention_mask"].bool()
    expected = F.binary_cross_entropy_with_logits(output.prediction_logits[real], corruption.replaced[real].float())
    torch.testing.assert_close(output.losses["rtd"], expected)
    expected_mlm = F.cross_entropy(corruption.generator_logits, batch["labels"][masked])
    torch.testing.assert_close(output.losses["mlm"], expected_mlm)
    torch.testing.assert_close(output.loss, 1.0 * expected_mlm + 50.0 * expected)


def test_the_discriminator_loss_does_not_reach_the_generator():
    model = tiny_electra()
    batch, _ = masked_batch()
    output = model(**batch)
    output.losses["rtd"].backward(retain_graph=True)
    generator = {name: p for name, p in model.named_parameters() if name.startswith("generator.")}
    assert generator and all(p.grad is None or not p.grad.any() for p in generator.values())
    assert model.bert.embeddings.word_embeddings.weight.grad.any()  # the shared embeddings learn from D
    output.losses["mlm"].backward()
    assert all(p.grad is not None and p.grad.any() for p in generator.values())


def test_collator_uniforms_belong_to_each_example_and_two_views_are_independent():
    masker = Masker("bert", mask_token_id=MASK, vocab_size=VOCAB, special_token_ids=[PAD, UNK, CLS, SEP], rate=0.3)
    rng = np.random.default_rng(0)
    rows = {"input_ids": [[CLS, *rng.integers(5, VOCAB, size=n).tolist(), SEP] for n in (20, 9, 14)]}
    options = dict(masker=masker, cls_token_id=CLS, sep_token_id=SEP, pad_token_id=PAD, candidate_draws=4)
    seeds = np.array([[0, 5, 0], [0, 5, 1], [0, 5, 2]])
    together = ElectraCollator(**options)(rows, seeds)
    alone = ElectraCollator(**options)({"input_ids": rows["input_ids"][1:2]}, seeds[1:2])
    first_count = int((together["labels"][0] >= 0).sum())
    second_count = int((together["labels"][1] >= 0).sum())
    n = int((alone["labels"] >= 0).sum())
    assert n == second_count and len(together["replacement_uniforms"]) == int((together["labels"] >= 0).sum())
    torch.testing.assert_close(
        together["replacement_uniforms"][first_count : first_count + n], alone["replacement_uniforms"]
    )
    torch.testing.assert_close(
        together["candidate_uniforms"][first_count : first_count + n], alone["candidate_uniforms"]
    )
    assert together.target_counts["rtd"] == int(together["attention_mask"].sum())

    views = ElectraCollator(views=2, contrastive=True, **options)(rows, seeds)
    assert views["input_ids"].shape[0] == 6 and views["view_partner"].tolist() == [3, 4, 5, 0, 1, 2]
    assert not torch.equal(views["labels"][:3] >= 0, views["labels"][3:] >= 0)  # independent masks
    original = torch.where(views["labels"] >= 0, views["labels"], views["input_ids"])
    assert torch.equal(original[:3], original[3:])  # of the same sequences
    assert views.target_counts["csp"] == 6 and views.target_counts["mlm"] == int((views["labels"] >= 0).sum())
    assert len(views["replacement_uniforms"]) == views.target_counts["mlm"]
    plain = ElectraCollator(views=2, **options)(rows, seeds)  # two corruptions without CSP's pairing
    assert "view_partner" not in plain and "csp" not in plain.target_counts
    torch.testing.assert_close(plain["labels"], views["labels"])


def test_fine_tuning_loads_the_discriminator_and_the_generator_stays_in_the_checkpoint(tmp_path):
    from safetensors import safe_open

    model = tiny_electra()
    model.save_pretrained(tmp_path / "model")
    with safe_open(str(tmp_path / "model" / "model.safetensors"), "pt") as handle:
        saved = set(handle.keys())
    assert any(key.startswith("generator.encoder.") for key in saved) and "generator.bias" in saved
    config = model.config
    config.task_kind, config.task_name, config.label_names = "ner", "toy", ["O", "B-x", "I-x"]
    tuned = KgplmForFineTuning.from_pretrained(tmp_path / "model", config=config)
    assert not [key for key in tuned.state_dict() if key.startswith(("generator.", "rtd_head."))]
    for name, tensor in model.bert.state_dict().items():
        assert torch.equal(tuned.bert.state_dict()[name], tensor), name


@pytest.mark.parametrize("fraction", [0.0, 1.5])
def test_bad_generator_size(fraction):
    from kgplm.exceptions import ConfigurationError

    with pytest.raises(ConfigurationError, match="generator_size"):
        ElectraConfig(generator_size=fraction)


# -- a positive control: D learns a corruption it can detect (issue 28) -------------------------------------
#: five disjoint "topics" of 11 tokens each; a sequence draws all its tokens from one topic
TOPICS = torch.arange(5, VOCAB).reshape(5, 11)


def topic_sequences(count: int, generator: torch.Generator, length: int = 22) -> tuple[torch.Tensor, torch.Tensor]:
    """[CLS] + ``length`` tokens of one topic + [SEP] per row (count, length + 2), and each row's topic (count,)."""
    topic = torch.randint(len(TOPICS), (count,), generator=generator)
    tokens = TOPICS[topic.unsqueeze(1), torch.randint(TOPICS.shape[1], (count, length), generator=generator)]
    return torch.cat([torch.full((count, 1), CLS), tokens, torch.full((count, 1), SEP)], 1), topic


def electra_batch(ids: torch.Tensor, generator: torch.Generator) -> dict:
    """ELECTRA's masking of ``ids``: 15 % of the tokens between [CLS] and [SEP] chosen (one at least), 85 % of
    those shown as [MASK]; the generator's uniforms."""
    chosen = torch.rand(ids.shape, generator=generator) < 0.15
    chosen[torch.arange(len(ids)), torch.randint(1, ids.shape[1] - 1, (len(ids),), generator=generator)] = True
    chosen[:, 0] = chosen[:, -1] = False
    inputs = ids.clone()
    inputs[chosen & (torch.rand(ids.shape, generator=generator) < 0.85)] = MASK
    return dict(
        input_ids=inputs,
        attention_mask=torch.ones_like(ids),
        token_type_ids=torch.zeros_like(ids),
        labels=torch.where(chosen, ids, torch.full_like(ids, -100)),
        replacement_uniforms=torch.rand(int(chosen.sum()), generator=generator),
    )


def test_the_discriminator_learns_a_detectable_corruption():
    """Trained as ELECTRA (G's MLM + λ = 50 · RTD, the trainer's AdamW and clipping at 1), D separates
    out-of-topic replacements from original tokens on unseen sequences: ROC AUC (scipy's Mann–Whitney U /
    n₁n₀) > 0.9 after 300 steps, where an untrained D is at chance. Fails if D reads the masked text or the
    original text instead of G's corruption, if the RTD labels are wrong, or if D's loss does not train it."""
    from kgplm.training.trainer import TrainerSettings, build_optimizer, optimizer_step

    held_out, topic = topic_sequences(128, torch.Generator().manual_seed(1))
    generator = torch.Generator().manual_seed(2)
    swapped = torch.rand(held_out.shape, generator=generator) < 0.15
    swapped[:, 0] = swapped[:, -1] = False
    other_topic = (topic.unsqueeze(1) + torch.randint(1, len(TOPICS), held_out.shape, generator=generator)) % len(
        TOPICS
    )
    corrupted = torch.where(
        swapped, TOPICS[other_topic, torch.randint(TOPICS.shape[1], held_out.shape, generator=generator)], held_out
    )

    def held_out_auc(model) -> float:
        model.eval()
        with torch.no_grad():
            logits = model(corrupted, torch.ones_like(corrupted)).prediction_logits  # D's RTD logits, no labels
        model.train()
        replaced, kept = logits[swapped].numpy(), logits[~swapped].numpy()
        return stats.mannwhitneyu(replaced, kept).statistic / (len(replaced) * len(kept))

    model = tiny_electra()
    assert abs(held_out_auc(model) - 0.5) < 0.1
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = build_optimizer(model, TrainerSettings(learning_rate=2e-3))
    generator = torch.Generator().manual_seed(0)
    for step in range(300):
        output = model(**electra_batch(topic_sequences(32, generator)[0], generator))
        optimizer.zero_grad()
        output.loss.backward()
        optimizer_step(optimizer, trainable, 1.0, None, step)
    auc = held_out_auc(model)
    assert auc > 0.9, auc
