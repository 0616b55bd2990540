"""The medicinal-product PLM: ELECTRA RTD with biomedical entity masking + product attribute prediction.

Liu, K., Jiang, J., Lyu, F. (2022). "A Domain Knowledge Enhanced Pre-Trained Language Model for
Vertical Search: Case Study on Medicinal Products", COLING (EP-PLM). Authors' code (TensorFlow 1,
on ELECTRA's): https://github.com/liuks/ep_plm. Where the paper leaves a choice open the code's is
taken, except where noted.

RTD with entity masking (§3.1, Eq. 1): the text's span units — jieba words and linked KG mentions
— are chosen with probability 0.15 each and replaced by as many [MASK] tokens (masking scheme
``word_entity``, :mod:`kgplm.text.masking`); G samples the masked tokens, D detects replacements:

    L_RTD = L_MLM(G) + λ · L_D,  λ = 50     (the ELECTRA core, :mod:`kgplm.models.electra`)

Product attribute prediction (§3.2, Eq. 2–3): for a product title t, attribute name n and values
v (:mod:`kgplm.methods.epplm.attributes`), with E(·) D's sentence encoding and f a feed-forward
projection,

    d(t, n, v) = ‖f(E(t ⊕ n)) − f(E(v))‖₁
    L_PAP(t, n) = (1/|P|) Σ_{v ∈ P} −log σ(γ − d(t, n, v)) + (1/k) Σ_{v' ∈ N} −log σ(d(t, n, v') − γ)

with P the group's positive values, N its k = 2|P| negatives (other values of the same attribute,
never a positive; :mod:`kgplm.methods.epplm.batching`), γ = 4; L_PAP is the mean over the
(t, n) groups of the batch. f(E(t ⊕ n)) is computed once per group and broadcast over its values
(a gather by candidate row). E(x) = BERT's pooler over D's [CLS] state (tanh(W h_[CLS]), the code's
``get_pooled_output``); f(x) = GELU(W x + b) (the code's dense layer with GELU).

Multi-task (§3.3, Algorithm 1, Eq. 4: L = L_RTD + L_PAP): a share ρ = 5% of steps are PAP steps
(``pap_probability``), decided from (seed, step) (:func:`kgplm.methods.epplm.batching.is_pap_step`).
The paper's Algorithm 1 trains a PAP step on L_PAP alone and the other steps on L_RTD alone: that is
``pap_schedule="alternate"``. kgplm's default ``"with_rtd"`` is a deviation (below).

What PAP has learnt is measured by :mod:`kgplm.methods.epplm.evaluation` (a PAP AUC on held-out
drugs with popularity- and length-matched negatives, a drug-shuffle control and drug-ignoring
baselines), and whether PAP training learnt anything about titles by comparing its loss with
:func:`~kgplm.methods.epplm.evaluation.title_agnostic_baseline_loss`.

Deviations and choices, and why:

* The norm of Eq. 2 is L1, as in the authors' code (``reduce_sum(abs(·))``); the paper does not say.
* t ⊕ n is the text pair "[CLS] t [SEP] n [SEP]" encoded once. The code encodes t and n apart,
  concatenates the two pooled vectors and projects them with a second dense layer (2H → H) while
  values get their own (H → H); one f, as Eq. 2 writes it, needs inputs of one size, and the pair
  lets the title and the attribute name attend to each other.
* Normalisation follows the code: the positive terms are averaged over the group's positives and
  the negative terms over its negatives (Eq. 3's 1/k), then averaged over groups.
* Negatives come from the same attribute's values (the paper's example: random indications for
  the indication attribute); the code samples them from every attribute value of the dataset.
  Both exclude the group's positives; kgplm also excludes the group's withheld (held-out) values,
  which are true of the title.
* Negatives are drawn ∝ how many titles have the value (``pap_negatives="frequency"``, the
  default: the value of a random triple of the same attribute), not uniformly over the distinct
  values as the paper's example and the authors' code (``pap_negative_samples``) do
  (``pap_negatives="uniform"``). Under the uniform law a positive is mostly a value many titles
  share and a negative mostly a value of one title, so a scorer that never reads the title
  separates them (AUC 0.90 on CMeKG's training candidates by popularity, 0.79 by length) and
  reaches a PAP loss of 0.606 against 1.269 under the frequency law (constant scorer 2 ln 2 =
  1.386; :func:`~kgplm.methods.epplm.evaluation.title_agnostic_baseline_loss`): under "uniform",
  most of the loss PAP can remove needs no knowledge of the drug.
* ``pap_schedule="with_rtd"`` (the default): a PAP step adds its PAP batch to that step's RTD batch
  (L = L_RTD + L_PAP on that step, Eq. 4), instead of replacing it as Algorithm 1 does
  (``pap_schedule="alternate"``, which runs exactly Algorithm 1). PAP gets the same ρ of steps
  either way, but under "with_rtd" it is only about half of a PAP step's update direction
  (‖∇L_PAP‖ / ‖∇(L_MLM + 50·L_D)‖ = 0.89–1.02, measured in a review), where under
  Algorithm 1 it is all of it;
  the RTD budget no longer depends on ρ, and one step exercises every parameter (the registry's
  generic test, which checks that gradients reach every trainable parameter in one batch, needs
  that: under "alternate" no batch reaches both G and f). ``experiments/electra_family.py``
  reports both schedules.
* PAP steps are evenly spread (⌊1/ρ⌋ or ⌈1/ρ⌉ apart, exactly ⌊nρ⌋ or ⌈nρ⌉ of any first n steps)
  rather than drawn independently (see :mod:`kgplm.methods.epplm.batching`): each step still has
  probability ρ.
* Masking: chosen units are replaced by [MASK] 100% of the time (``mask_fraction=1``), as the
  paper's text says (§3.1); the authors' code replaces 85% with [MASK] and keeps 15% unchanged
  (``pretrain_helpers.mask``, ELECTRA's default). kgplm follows the paper; the fair control uses
  the same fractions.
* The authors' PAP code multiplies each value's pooled vector by its label before the projection
  (``tail = phrase_labels * pooled_output`` in ``run_pretraining.py``, labels +1 / −1), so the sign
  of f's input tells a positive from a negative and the loss can be driven down without the
  title, the attribute or the value text. kgplm does not copy it: f(E(v)) never sees the label.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.utils import scatter

from kgplm.methods.epplm.configuration import EpplmConfig
from kgplm.models.electra import ELECTRA_ENCODING, KgplmForReplacedTokenDetection
from kgplm.models.modules import PretrainingOutput
from kgplm.models.objectives import Objective

__all__ = ["EpplmForPreTraining", "AttributeProjection", "attribute_distances", "product_attribute_objective"]


class AttributeProjection(nn.Module):
    """f(x) = GELU(W x + b), the feed-forward projection of Eq. 2."""

    def __init__(self, config: EpplmConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, vectors: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.dense(vectors))


def attribute_distances(
    query_vectors: torch.Tensor,
    value_vectors: torch.Tensor,
    candidate_group: torch.Tensor,
    candidate_value: torch.Tensor,
) -> torch.Tensor:
    """d = ‖f(E(t ⊕ n)) − f(E(v))‖₁ per candidate; ``query_vectors`` (groups, H) and ``value_vectors``
    (values, H) are already projected by f. (candidates,)."""
    return (query_vectors[candidate_group] - value_vectors[candidate_value]).abs().sum(-1)


def product_attribute_objective(
    distances: torch.Tensor, candidate_group: torch.Tensor, candidate_label: torch.Tensor, margin: float
) -> Objective | None:
    """Eq. 3 per group, averaged over groups (module docstring); accuracy: candidates on their side of γ."""
    if len(distances) == 0:
        return None
    positive = candidate_label.bool()
    terms = torch.where(positive, -F.logsigmoid(margin - distances), -F.logsigmoid(distances - margin))  # (candidates,)
    num_groups = int(candidate_group.max()) + 1

    def group_mean(selected: torch.Tensor) -> torch.Tensor:
        total = scatter(terms * selected, candidate_group, dim=0, dim_size=num_groups, reduce="sum")
        count = scatter(selected.float(), candidate_group, dim=0, dim_size=num_groups, reduce="sum")
        return total / count.clamp(min=1)  # (groups,)

    loss = (group_mean(positive) + group_mean(~positive)).mean()
    accuracy = ((distances < margin) == positive).float().mean()
    return Objective(loss, accuracy.detach(), num_groups)


class EpplmForPreTraining(KgplmForReplacedTokenDetection):
    """ELECTRA (G + D + RTD) with D's pooler and f for product attribute prediction (module docstring).

    Inputs beyond the core's (absent at RTD-only steps; ``input_ids`` absent at PAP-only steps of
    ``pap_schedule="alternate"``): the ``pap_*`` tensors of
    :class:`~kgplm.methods.epplm.batching.EpplmCollator`.
    """

    config_class = EpplmConfig
    discriminator_pooler = True

    def build_heads(self, config: EpplmConfig) -> None:
        self.pap_projection = AttributeProjection(config)

    def encode_texts(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        """f(E(x)) of short texts (rows, H): D's pooled [CLS] state, projected."""
        hidden = self.discriminate(input_ids, attention_mask, token_type_ids)
        return self.pap_projection(ELECTRA_ENCODING.pool(self, hidden))

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        replacement_uniforms: torch.Tensor | None = None,
        pap_query_ids: torch.Tensor | None = None,
        pap_query_mask: torch.Tensor | None = None,
        pap_query_type_ids: torch.Tensor | None = None,
        pap_value_ids: torch.Tensor | None = None,
        pap_value_mask: torch.Tensor | None = None,
        pap_candidate_group: torch.Tensor | None = None,
        pap_candidate_value: torch.Tensor | None = None,
        pap_candidate_label: torch.Tensor | None = None,
    ) -> PretrainingOutput:
        config = self.config
        if labels is None and pap_query_ids is None:
            return super().forward(input_ids, attention_mask, token_type_ids)
        output = PretrainingOutput(losses={}, loss_weights={}, metrics={})
        if input_ids is not None and labels is not None:
            self.replaced_token_detection(
                output, input_ids, attention_mask, token_type_ids, labels, replacement_uniforms
            )
        if pap_query_ids is not None:
            queries = self.encode_texts(pap_query_ids, pap_query_mask, pap_query_type_ids)  # (groups, H)
            values = self.encode_texts(pap_value_ids, pap_value_mask)  # (values, H)
            distances = attribute_distances(queries, values, pap_candidate_group, pap_candidate_value)
            output.add(
                "pap",
                product_attribute_objective(distances, pap_candidate_group, pap_candidate_label, config.pap_margin),
                config.pap_weight,
            )
        return output
