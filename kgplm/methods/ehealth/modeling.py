"""eHealth: ELECTRA with multi-token selection (MTS) and contrastive sequence prediction (CSP).

Wang, Q., Dai, S., Xu, B., Lyu, Y., Zhu, Y., Wu, H., Wang, H. (2021). "Building Chinese Biomedical
Language Models via Multi-Level Text Discrimination". arXiv:2110.07244 (eHealth). The authors'
pre-training code (PaddlePaddle) was never released; this follows the paper.

Generator and RTD are the ELECTRA core's (:mod:`kgplm.models.electra`: Eq. 1–4, with RTD's
probability written for "replaced"). x^R is a corruption of x, M its masked positions,
R = {t ∈ M : x^R_t ≠ x_t} its replaced positions, h_D(x^R)_t D's state, e(·) the (shared) word
embeddings.

MTS (Eq. 5–6): at each t ∈ R the candidates are S_t = {x_t} ∪ {k non-original tokens drawn from
p_G(· | x^M)}, k = 5, and

    p_D(x_t | x^R, S_t) = exp(e(x_t)ᵀ h_D(x^R)_t) / Σ_{x' ∈ S_t} exp(e(x')ᵀ h_D(x^R)_t)
    L_MTS = −(1/|M|) Σ_{t ∈ R} log p_D(x_t | x^R, S_t)      (Eq. 6's sum over R, divided by |M|)

CSP (Eq. 7): every sequence x is corrupted twice, independently (masks and generator samples),
into x^R_i and x^R_j; μ(·) = h_D(·)_[CLS] / ‖h_D(·)_[CLS]‖, s(u, v) = μ(u)ᵀμ(v), and for each of
the 2N corruptions of a batch of N sequences (anchor a, partner p)

    L_CSP = −mean_a log [exp(s(a, p)/τ) / Σ_{b ≠ a} exp(s(a, b)/τ)],  τ = 0.07

the sum running over the other 2N − 1 corruptions: the partner and the 2N − 2 corruptions of the
other sequences (N(x)).

Total (Eq. 8): L = L_MLM + λ₁ L_RTD + λ₂ L_MTS + λ₃ L_CSP, λ = (50, 20, 1); the discriminator
losses do not reach the generator (the samples are discrete draws of detached logits).

Deviations and choices, and why:

* The paper's losses are sums over positions (Eq. 2, 4, 6); they are means here, as in ELECTRA's
  code, whose loss scale the λ's were set for (λ₁ = 50 is ELECTRA's discriminator weight).
  L_MLM is a mean over the masked positions M, L_RTD over the real tokens, and L_MTS is Eq. 6's sum
  over the replaced positions R divided by |M|, not by |R|: (i) the ratio of L_MTS to L_MLM is then
  the paper's (Eq. 2 and 6 are both sums), so a replaced token weighs the same whether G replaced
  many tokens of the batch or few; (ii) |M| is known to the collator before G samples, so
  ``mts`` is target-counted like every other loss (``Batch.target_counts["mts"]`` = masked tokens):
  under gradient accumulation and data parallelism the step's L_MTS is that of the whole batch
  (a mean over R was averaged per micro-batch, and a micro-batch without a replaced
  token lowered the step's MTS weight). Logged: ``mts`` is that loss, ``mts_replaced`` the share
  |R|/|M| (so ``mts`` / ``mts_replaced`` is the mean over R) and ``mts_correct`` the share of masked
  positions that were replaced and whose original MTS picks (``mts_correct`` / ``mts_replaced`` is
  the accuracy over R); all three are exact over a step because they share the masked-count weight.
* Output heads (Eq. 1, Eq. 3): the paper writes G's softmax as e(x)ᵀ h_G(x^M)_t over the
  vocabulary and RTD as a single sigmoid layer σ(wᵀ h_D(x^R)_t). kgplm uses ELECTRA's heads
  instead (:mod:`kgplm.models.electra`): G's logits are e(x)ᵀ LN(GELU(W h_G)) + b_x (a dense layer,
  GELU and LayerNorm before the tied output matrix, plus an output bias), and the RTD logit is
  w₂ᵀ GELU(W₁ h_D) (one dense layer and GELU before the scoring vector). The paper describes the
  model in ELECTRA's terms and its code was never released; ELECTRA's heads are what an ELECTRA
  implementation (Clark et al.'s code, transformers' ``ElectraForPreTraining``) has, and the same
  heads make the ``electra`` control differ from eHealth by MTS and CSP only. MTS (Eq. 5) follows
  the paper: a plain dot product of D's last hidden state with the candidates' word embeddings, no head.
* MTS candidates are drawn as the paper says, independently of the replacement x̂_t: k draws
  without replacement from p_G(· | x^M) restricted to the non-original tokens, by inverse CDF with
  uniforms from the collator (:func:`kgplm.models.electra.sample_distinct_tokens`): no
  (positions × vocabulary) one-hot per candidate is built.
* RTD and MTS are computed on both corruptions (Fig. 1), G's MLM on both masked copies. The
  ``no_csp`` ablation and the ``electra`` control keep both corruptions (``corruption_views`` 2):
  every row of eHealth's comparison trains on the same RTD/MLM targets per step.
* CSP's negatives are the other sequences of the micro-batch: with gradient accumulation each
  micro-batch is its own contrastive batch (as SimCLR per device); ``csp`` is counted per
  anchor so that micro-batches are weighted by size.
* Masking: whole-word masking over jieba words (with the KG's names in the dictionary), each word
  chosen with probability 0.15, 80/10/10 replacement (footnote 2). The vocabulary is kgplm's
  in-domain WordPiece (:func:`kgplm.text.build_vocab`, the default of ``kgplm.train``) rather than
  Tensor2Tensor's.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kgplm.methods.ehealth.configuration import EhealthConfig
from kgplm.models.electra import Corruption, KgplmForReplacedTokenDetection, sample_distinct_tokens
from kgplm.models.modules import PretrainingOutput
from kgplm.models.objectives import Objective

__all__ = [
    "EhealthForPreTraining",
    "mts_candidates",
    "multi_token_selection_objective",
    "contrastive_sequence_objective",
]


def mts_candidates(generator_logits: torch.Tensor, original_ids: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """S_t per replaced position: (n, 1 + k) ids, column 0 the original x_t, then k = ``uniforms.shape[1]``
    distinct non-original tokens drawn from softmax(``generator_logits``) (n, vocab) without replacement."""
    original = original_ids.unsqueeze(1)  # (n, 1)
    return torch.cat([original, sample_distinct_tokens(generator_logits, uniforms, original)], 1)


def multi_token_selection_objective(
    states: torch.Tensor, candidate_embeddings: torch.Tensor, masked_count: int
) -> Objective | None:
    """Eq. 5–6 summed over the replaced positions and divided by ``masked_count`` |M| (module docstring):
    ``states`` h_D(x^R)_t (n, H), ``candidate_embeddings`` e(S_t) (n, k + 1, H), original first.

    ``accuracy`` is the share of the n replaced positions whose original wins; ``count`` is n."""
    if len(states) == 0 or masked_count < 1:
        return None
    logits = torch.einsum("nh,nch->nc", states.float(), candidate_embeddings.float())  # (n, k + 1)
    targets = torch.zeros(len(logits), dtype=torch.long, device=logits.device)
    loss = F.cross_entropy(logits, targets, reduction="sum") / masked_count
    return Objective(loss, (logits.argmax(-1) == 0).float().mean().detach(), len(logits))


def contrastive_sequence_objective(
    sequence_states: torch.Tensor, partner: torch.Tensor, temperature: float
) -> Objective | None:
    """Eq. 7 over every corruption as anchor: ``sequence_states`` h_D(·)_[CLS] (rows, H), ``partner`` (rows,)."""
    if len(sequence_states) < 2:
        return None
    unit = F.normalize(sequence_states.float(), dim=-1)  # μ_D, (rows, H)
    similarity = unit @ unit.T / temperature  # (rows, rows)
    self_pairs = torch.eye(len(unit), dtype=torch.bool, device=unit.device)
    similarity = similarity.masked_fill(self_pairs, float("-inf"))
    loss = F.cross_entropy(similarity, partner)
    return Objective(loss, (similarity.argmax(-1) == partner).float().mean().detach(), len(unit))


class EhealthForPreTraining(KgplmForReplacedTokenDetection):
    """ELECTRA (G + D + RTD) with eHealth's MTS and CSP on D (module docstring).

    Inputs beyond the core's: ``candidate_uniforms`` (masked, k), the uniforms of the MTS
    draws at every masked token (only those at replaced tokens are used); ``view_partner``
    (rows,), the row of each row's other corruption (:class:`~kgplm.models.electra_batching.ElectraCollator`
    with ``views=2``).
    """

    config_class = EhealthConfig

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        replacement_uniforms: torch.Tensor | None = None,
        candidate_uniforms: torch.Tensor | None = None,
        view_partner: torch.Tensor | None = None,
    ) -> PretrainingOutput:
        if labels is None:
            return super().forward(input_ids, attention_mask, token_type_ids)
        config = self.config
        output = PretrainingOutput(losses={}, loss_weights={}, metrics={})
        corruption, hidden = self.replaced_token_detection(
            output, input_ids, attention_mask, token_type_ids, labels, replacement_uniforms
        )
        if config.use_mts:
            objective, shares = self.multi_token_selection(corruption, hidden, candidate_uniforms)
            if objective is not None:  # logged as shares of the masked count: exact over a step (docstring)
                output.add("mts", objective.loss, config.mts_weight)
                output.metrics.update(shares)
        if config.use_csp and view_partner is not None:
            output.add(
                "csp",
                contrastive_sequence_objective(hidden[:, 0], view_partner, config.csp_temperature),
                config.csp_weight,
            )
        return output

    def multi_token_selection(
        self, corruption: Corruption, hidden: torch.Tensor, candidate_uniforms: torch.Tensor | None
    ) -> tuple[Objective | None, dict]:
        """L_MTS over the replaced positions of ``corruption`` (divided by the masked count) and its
        logged shares; D's states ``hidden`` (batch, length, H)."""
        masked_count = int(corruption.masked.sum())
        replaced = corruption.replaced[corruption.masked]  # (masked,) which masked tokens were replaced
        if masked_count == 0:
            return None, {}
        if not bool(replaced.any()):  # nothing to select: L_MTS is 0 over this micro-batch's masked tokens
            zero = hidden.new_zeros(())
            return Objective(hidden.sum() * 0.0, zero, 0), {"mts_replaced": zero, "mts_correct": zero}
        draws = self.config.mts_candidates
        uniforms = (
            candidate_uniforms[replaced]
            if candidate_uniforms is not None
            else torch.rand(int(replaced.sum()), draws, device=hidden.device)
        )
        candidates = mts_candidates(
            corruption.generator_logits[replaced], corruption.original_ids[corruption.replaced], uniforms[:, :draws]
        )  # (replaced, k + 1)
        objective = multi_token_selection_objective(
            hidden[corruption.replaced], self.word_embeddings().weight[candidates], masked_count
        )
        replaced_share = torch.tensor(objective.count / masked_count, device=hidden.device)
        return objective, {"mts_replaced": replaced_share, "mts_correct": objective.accuracy * replaced_share}
