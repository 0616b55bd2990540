"""The ELECTRA generator/discriminator pair that eHealth and the medicinal-product PLM build on.

Clark et al. (2020), "ELECTRA: Pre-training Text Encoders as Discriminators Rather Than
Generators", ICLR. A small generator G is trained by MLM on the masked text; its samples replace
the masked tokens; the discriminator D, the encoder that is kept, learns which tokens were replaced.

Equations (M: the positions the text pipeline's masker chose, ``labels ≥ 0``; x^M the masked text):

    p_G(x_t | x^M) = softmax_x(e(x)ᵀ LN(GELU(W h_G(x^M)_t)) + b_x)               (ELECTRA's generator head)
    L_MLM = −mean_{t ∈ M} log p_G(x_t | x^M)
    x̂_t ~ p_G(· | x^M) for t ∈ M (no gradient);  x^R = x with x_t ← x̂_t on M
    r_t = 1[x^R_t ≠ x_t]     (a sample equal to the original counts as original, as in ELECTRA)
    L_RTD = −mean_{t real tokens} [r_t log σ(s_t) + (1 − r_t) log(1 − σ(s_t))],
            s_t = w₂ᵀ GELU(W₁ h_D(x^R)_t)                                         (ELECTRA's discriminator head)
    L = w_MLM L_MLM + λ L_RTD,  λ = ``rtd_weight`` = 50, w_MLM = ``mlm_weight`` = 1

eHealth (Eq. 3–4) writes the RTD probability as p_D(x^R_t = x_t) = σ(wᵀh); σ(s_t) here is its
complement 1 − p_D, the same loss.

Parameters (checkpoint names):

* ``bert`` — D, a plain BERT encoder (:class:`~kgplm.models.encoding.Encoding`); it is what
  ``KgplmForFineTuning.from_pretrained(model/)`` loads, so fine-tuning gets D and never G.
* ``generator.*`` — G, saved inside ``model/`` under its own prefix (fine-tuning ignores it):
  ``embeddings_project`` (D's hidden size → G's), ``encoder`` (BERT layers of G's size),
  ``transform``/``norm`` (the head's dense + LayerNorm, G's hidden size → D's embedding size) and
  ``bias``; the output matrix is D's word-embedding matrix.
* ``rtd_head.*`` — the discriminator head.

Shared embeddings: G calls D's whole embedding block (word, position and token-type embeddings
and their LayerNorm) as a function, then projects it to its own hidden size with
``embeddings_project`` — what ELECTRA's code does when the two hidden sizes differ (its
``embedding_size`` is D's hidden size for base models, ``generator/embeddings_project``). No tensor
is duplicated, so nothing needs tying and the checkpoint holds each weight once. Both G's MLM loss
and D's losses train the shared embeddings (as in ELECTRA); G's own parameters receive no gradient
from D's losses, because x̂ is a discrete sample of detached logits (tested).

Generator size (``generator_size`` s = 1/3, eHealth and ELECTRA-base): D's depth; heads
max(1, round(A·s)); hidden size heads · round(H·s / heads) (≈ H·s, a multiple of the heads);
intermediate size round(I·s). Base (768, 12, 3072) gives (256, 4, 1024), as ELECTRA-base.

Sampling: x̂_t is drawn by inverse CDF, x̂ = min{x : F(x) > u·F(V)} with F the cumulative sum of
p_G over the vocabulary and u ~ U[0, 1) one float per masked token that the collator draws from the
example's own generator (seeded by (seed, step, position)). The draw has exactly ELECTRA's
distribution (ELECTRA adds Gumbel noise from the TF random generator), but a corruption depends
only on the example and the model, not on torch's RNG or on which examples share the micro-batch,
so gradient accumulation and resume see the same corruptions. :func:`sample_distinct_tokens` draws
without replacement (eHealth's MTS candidates) by zeroing the mass of the tokens already drawn and
drawing again; nothing of size (candidates × vocabulary) is built. ELECTRA's own masking replaces 85% of the chosen tokens with
[MASK] and keeps 15% (``mask_fraction`` 0.85, ``random_fraction`` 0, the defaults here); eHealth and
EP-PLM set their own.

Deviations from ELECTRA: none in the equations. ELECTRA masks a fixed number of tokens per sequence
(round(0.15 n)); kgplm's masker chooses each unit with probability 0.15
(:mod:`kgplm.text.masking`), with at least one per sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import BertConfig
from transformers.models.bert.modeling_bert import BertEncoder

from kgplm.exceptions import ConfigurationError
from kgplm.models.configuration import KgplmConfig
from kgplm.models.encoding import Encoding
from kgplm.models.modules import (
    KgplmPreTrainedModel,
    PretrainingOutput,
    extended_attention_mask,
    run_encoder_layers,
)
from kgplm.models.objectives import Objective, classification_objective

__all__ = [
    "ElectraConfig",
    "ElectraGenerator",
    "ReplacedTokenHead",
    "Corruption",
    "KgplmForReplacedTokenDetection",
    "ELECTRA_ENCODING",
    "sample_tokens",
    "sample_distinct_tokens",
    "token_probabilities",
    "draw_tokens",
    "replaced_token_objective",
]

#: D is a plain BERT encoder: the encoding every ELECTRA-family method registers.
ELECTRA_ENCODING = Encoding()


class ElectraConfig(KgplmConfig):
    """Plain ELECTRA (``method="electra"``) and the fields every ELECTRA-family method shares.

    ``generator_size``: G's size as a fraction of D's (hidden size, intermediate size, heads).
    ``mlm_weight``, ``rtd_weight``: the weights of G's MLM loss and D's RTD loss (λ).
    ``mask_fraction``, ``random_fraction``: how the masker replaces chosen tokens ([MASK] / a random
    token / kept); ELECTRA's 85 / 0 / 15 by default.
    ``corruption_views``: how many independent corruptions of every sequence a step trains on (1 or
    2). eHealth needs two for CSP; its fair control and its ``no_csp`` ablation set 2 as well, so
    every row of eHealth's comparison sees the same RTD/MLM targets and about the same compute per step.
    """

    method_fields = (
        "generator_size",
        "mlm_weight",
        "rtd_weight",
        "mask_fraction",
        "random_fraction",
        "corruption_views",
    )

    def __init__(
        self,
        method: str = "electra",
        generator_size: float = 1 / 3,
        mlm_weight: float = 1.0,
        rtd_weight: float = 50.0,
        mask_fraction: float = 0.85,
        random_fraction: float = 0.0,
        corruption_views: int = 1,
        **kwargs,
    ) -> None:
        super().__init__(method=method, **kwargs)
        if corruption_views not in (1, 2):
            raise ConfigurationError(f"corruption_views must be 1 or 2, got {corruption_views!r}")
        self.corruption_views = corruption_views
        if not 0.0 < generator_size <= 1.0:
            raise ConfigurationError(f"generator_size must be in (0, 1], got {generator_size}")
        if mask_fraction < 0 or random_fraction < 0 or mask_fraction + random_fraction > 1:
            raise ConfigurationError(
                f"mask_fraction ({mask_fraction}) and random_fraction ({random_fraction}) "
                f"must be non-negative and sum to at most 1"
            )
        self.generator_size = generator_size
        self.mlm_weight = mlm_weight
        self.rtd_weight = rtd_weight
        self.mask_fraction = mask_fraction
        self.random_fraction = random_fraction

    def generator_config(self) -> BertConfig:
        """G's BERT configuration (see the module docstring for the sizes)."""
        heads = max(1, round(self.num_attention_heads * self.generator_size))
        hidden = heads * max(1, round(self.hidden_size * self.generator_size / heads))
        fields = {key: value for key, value in self.to_dict().items() if key in BertConfig().to_dict()}
        fields.update(
            hidden_size=hidden,
            num_attention_heads=heads,
            intermediate_size=max(1, round(self.intermediate_size * self.generator_size)),
        )
        for key in ("architectures", "model_type", "transformers_version", "_name_or_path"):
            fields.pop(key, None)
        config = BertConfig(**fields)
        config._attn_implementation = self._attn_implementation
        return config


def token_probabilities(logits: torch.Tensor) -> torch.Tensor:
    """softmax(logits) (n, vocab), detached, with a floor of 1e-30 so that a row whose mass all
    underflows still draws among its allowed tokens."""
    return torch.softmax(logits.detach().float(), dim=-1) + 1e-30


def draw_tokens(probabilities: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Inverse CDF: the first token whose cumulative mass exceeds u · total, per row; (n,).

    Tokens of zero mass (excluded ones) are never drawn: their cumulative value equals the one
    before them, so a token before them is found first.
    """
    cumulative = probabilities.cumsum(-1)  # (n, vocab)
    total = cumulative[:, -1:].contiguous()  # (n, 1)
    drawn = torch.searchsorted(cumulative, uniforms.float().unsqueeze(-1) * total, right=True)
    # u·total can round up to total: stay at the last token that carries mass
    last = torch.searchsorted(cumulative, total, right=False)
    return torch.minimum(drawn, last).squeeze(-1)


def sample_tokens(logits: torch.Tensor, uniforms: torch.Tensor, excluded: torch.Tensor | None = None) -> torch.Tensor:
    """One token per row of ``logits`` (n, vocab) from softmax(logits), (n,); ``uniforms`` (n,) in [0, 1).

    ``excluded`` (n, m): token ids a row may not draw (their mass is removed, the rest renormalised).
    """
    probabilities = token_probabilities(logits)
    if excluded is not None and excluded.numel():
        probabilities = probabilities.scatter(1, excluded, 0.0)
    return draw_tokens(probabilities, uniforms)


def sample_distinct_tokens(logits: torch.Tensor, uniforms: torch.Tensor, excluded: torch.Tensor) -> torch.Tensor:
    """``uniforms.shape[1]`` draws per row without replacement from softmax(logits) without the
    ``excluded`` (n, m) tokens: each draw renormalises over the tokens not yet drawn. (n, draws)."""
    probabilities = token_probabilities(logits).scatter(1, excluded, 0.0)  # (n, vocab)
    draws = []
    for column in range(uniforms.shape[1]):
        token = draw_tokens(probabilities, uniforms[:, column])  # (n,)
        probabilities.scatter_(1, token.unsqueeze(-1), 0.0)
        draws.append(token)
    return torch.stack(draws, 1) if draws else excluded.new_zeros(len(excluded), 0)


def replaced_token_objective(
    logits: torch.Tensor, replaced: torch.Tensor, attention_mask: torch.Tensor | None
) -> Objective | None:
    """ELECTRA's RTD: binary cross-entropy of ``logits`` (batch, length) against ``replaced`` over real tokens."""
    real = torch.ones_like(replaced, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    count = int(real.sum())
    if count == 0:
        return None
    chosen_logits, targets = logits[real].float(), replaced[real].float()  # (count,), (count,)
    loss = F.binary_cross_entropy_with_logits(chosen_logits, targets)
    accuracy = ((chosen_logits > 0).float() == targets).float().mean()
    return Objective(loss, accuracy.detach(), count)


class ElectraGenerator(nn.Module):
    """G: D's embedding block (called, not owned) → ``embeddings_project`` → BERT layers → MLM head."""

    def __init__(self, config: ElectraConfig) -> None:
        super().__init__()
        self.config = config.generator_config()
        size = self.config.hidden_size
        self.embeddings_project = nn.Linear(config.hidden_size, size) if size != config.hidden_size else None
        self.encoder = BertEncoder(self.config)
        self.transform = nn.Linear(size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(
        self,
        embeddings: torch.Tensor,
        attention_mask: torch.Tensor | None,
        positions: torch.Tensor,
        word_embeddings: torch.Tensor,
    ) -> torch.Tensor:
        """Logits (masked, vocab) at ``positions`` (batch, length) bool, from D's ``embeddings`` (batch, length, H)."""
        hidden = self.embeddings_project(embeddings) if self.embeddings_project is not None else embeddings
        mask = extended_attention_mask(self.config, hidden, attention_mask)
        hidden = run_encoder_layers(self.encoder.layer, hidden, mask)  # (batch, length, H_G)
        chosen = self.norm(F.gelu(self.transform(hidden[positions])))  # (masked, H)
        return F.linear(chosen, word_embeddings, self.bias)  # (masked, vocab)


class ReplacedTokenHead(nn.Module):
    """s_t = w₂ᵀ GELU(W₁ h_t): ELECTRA's discriminator head, one logit per token (replaced vs original)."""

    def __init__(self, config: KgplmConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.score = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.score(F.gelu(self.dense(hidden))).squeeze(-1)  # (batch, length)


@dataclass
class Corruption:
    """One corruption x^R of a batch: what G saw, what it sampled and where D must find replacements.

    ``masked`` (batch, length) bool: the positions M; ``original_ids``, ``corrupted_ids`` (batch,
    length); ``generator_logits`` (masked, vocab) and ``sampled_ids`` (masked,) in the row-major
    order of ``masked``; ``replaced`` (batch, length) bool, x^R_t ≠ x_t.
    """

    masked: torch.Tensor
    original_ids: torch.Tensor
    corrupted_ids: torch.Tensor
    generator_logits: torch.Tensor
    sampled_ids: torch.Tensor
    replaced: torch.Tensor


class KgplmForReplacedTokenDetection(KgplmPreTrainedModel):
    """Plain ELECTRA: G trained by MLM, D by replaced-token detection (see the module docstring).

    Inputs: the pre-training collator's ``input_ids`` (the masked text x^M), ``attention_mask``,
    ``token_type_ids``, ``labels`` (original ids at M, −100 elsewhere) and
    ``replacement_uniforms`` (masked,): the uniforms of the generator's draws (torch's RNG is used
    when they are absent). ``prediction_logits`` of the output are D's RTD logits (batch, length).
    Subclasses add objectives on top of :meth:`replaced_token_detection`.
    """

    config_class = ElectraConfig
    #: whether D carries BERT's [CLS] pooler (EP-PLM encodes sentences with it; eHealth and ELECTRA do not).
    discriminator_pooler = False

    def __init__(self, config: ElectraConfig) -> None:
        super().__init__(config)
        ELECTRA_ENCODING.build(self, config, pooler=self.discriminator_pooler)
        self.generator = ElectraGenerator(config)
        self.rtd_head = ReplacedTokenHead(config)
        self.build_heads(config)
        self.post_init()

    def build_heads(self, config: ElectraConfig) -> None:
        """Add a subclass's own modules (before the weights are initialised); plain ELECTRA has none."""

    def get_output_embeddings(self):
        return None  # G's output matrix is D's word embeddings, used as a function: nothing to tie

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, ElectraGenerator):
            module.bias.zero_()

    def word_embeddings(self) -> nn.Embedding:
        return ELECTRA_ENCODING.word_embeddings(self)

    # -- the two networks ----------------------------------------------------------------------------
    def corrupt(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        token_type_ids: torch.Tensor | None,
        labels: torch.Tensor,
        replacement_uniforms: torch.Tensor | None = None,
    ) -> Corruption:
        """Run G on the masked text and sample x^R (the logits keep their graph for L_MLM)."""
        masked = labels >= 0  # (batch, length)
        embeddings = self.bert.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)  # (batch, length, H)
        logits = self.generator(embeddings, attention_mask, masked, self.word_embeddings().weight)  # (masked, vocab)
        uniforms = (
            replacement_uniforms if replacement_uniforms is not None else torch.rand(len(logits), device=logits.device)
        )
        if len(uniforms) != len(logits):
            raise ConfigurationError(
                f"replacement_uniforms holds {len(uniforms)} values for {len(logits)} masked tokens"
            )
        sampled = sample_tokens(logits, uniforms)  # (masked,)
        original = torch.where(masked, labels, input_ids)
        corrupted = original.masked_scatter(masked, sampled)
        return Corruption(masked, original, corrupted, logits, sampled, corrupted != original)

    def discriminate(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, token_type_ids: torch.Tensor | None
    ) -> torch.Tensor:
        """D's token states (batch, length, H) of a (corrupted) text."""
        return ELECTRA_ENCODING.encode(self, input_ids, attention_mask, token_type_ids).last_hidden_state

    def replaced_token_detection(
        self, output: PretrainingOutput, input_ids, attention_mask, token_type_ids, labels, replacement_uniforms
    ) -> tuple[Corruption, torch.Tensor]:
        """Corrupt, discriminate, add ``mlm`` and ``rtd`` to ``output``; returns (corruption, D's states)."""
        config = self.config
        corruption = self.corrupt(input_ids, attention_mask, token_type_ids, labels, replacement_uniforms)
        hidden = self.discriminate(corruption.corrupted_ids, attention_mask, token_type_ids)
        rtd_logits = self.rtd_head(hidden)  # (batch, length)
        output.prediction_logits, output.last_hidden_state = rtd_logits, hidden
        masked_labels = labels[corruption.masked]  # (masked,)
        output.add("mlm", classification_objective(corruption.generator_logits, masked_labels), config.mlm_weight)
        output.add("rtd", replaced_token_objective(rtd_logits, corruption.replaced, attention_mask), config.rtd_weight)
        if len(masked_labels):  # how often G's sample is the original (ELECTRA's sampled_masked_lm_accuracy)
            output.metrics["mlm_sampled_accuracy"] = (corruption.sampled_ids == masked_labels).float().mean()
        return corruption, hidden

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        replacement_uniforms: torch.Tensor | None = None,
    ) -> PretrainingOutput:
        """With ``labels``: G's MLM and D's RTD on the corrupted text. Without: D's RTD logits of ``input_ids``."""
        output = PretrainingOutput(losses={}, loss_weights={}, metrics={})
        if labels is None:
            hidden = self.discriminate(input_ids, attention_mask, token_type_ids)
            output.prediction_logits, output.last_hidden_state = self.rtd_head(hidden), hidden
            return output
        self.replaced_token_detection(output, input_ids, attention_mask, token_type_ids, labels, replacement_uniforms)
        return output
