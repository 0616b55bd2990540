"""EMBERT: context-entity consistency prediction, entity segmentation and bidirectional entity masking.

Paper: Cai, Zhang, Wang and He (2021), "EMBERT: A Pre-trained Language Model for Chinese Medical
Text Mining", APWeb-WAIM 2021, LNCS 12858, §3 and the appendix. No code was published; this is
the first implementation, so where the paper is silent the choice is stated below.

Notation: x_1 … x_n the encoder's output states (d = hidden size), [a; b] concatenation,
LN = LayerNorm, GELU the activation, token positions inclusive as in the paper (s … e).

Equations implemented
---------------------
Context-entity consistency prediction (CECP, Eq. 1–3). A linked mention (s_i … e_i) is replaced by
a synonym from the thesaurus (label c_i = consistent) or by a name of a random KG entity
(c_i = inconsistent); from the states just outside it:
    h_i = [x_{s_i−1}; x_{e_i+1}],   y_i = LN(GELU(W_1 h_i)),   p(c_i | y_i) = softmax(W_2 y_i)
    L_CECP = −(1/N) Σ_i log p(c_i | y_i)        over the N replaced mentions
Entity segmentation (ES, Eq. 4–5). Every token t of a linked mention is labelled s_t = 1 when it is
the last token of a sub-entity (:mod:`kgplm.methods.embert.segments`) and 0 otherwise; tokens
outside mentions are not scored:
    y_t = tanh(W_3 LN(GELU(W_4 x_t)) + b),   p(s_t | y_t) = softmax(W_5 y_t)
    L_ES = −mean_t log p(s_t | y_t)             over the labelled tokens
Bidirectional entity masking (BEM, Eq. 6–9). A long mention is split into its adjective term and
its atomic term; one of the two (each direction with probability 1/2) is masked and each of its
tokens j is predicted from the boundary states of the other, visible part (s_o … e_o) and the
position of j inside the masked part (s_m … e_m):
    h⁰_j = [x_{s_o}; x_{e_o}; p_{j−s_m}],   h¹_j = LN(GELU(W_6 h⁰_j)),   y_j = LN(GELU(W_7 h¹_j))
    p(x_j | y_j) = exp(y_j · w_{x_j}) / Σ_k exp(y_j · w_k)     (w_k: the tied token embeddings)
    L_BEM = L_BEM^ato + L_BEM^adj = −mean_j log p(x_j | y_j)   over the masked tokens of both directions
Objective (Eq. 10): L = L_MLM + λ1 L_CECP + λ2 L_ES + λ3 L_BEM, (λ1, λ2, λ3) = (2, 2, 0.5).

Deviations and choices
----------------------
* Biases: as written — only Eq. 4's b (W_3's bias); W_1, W_2, W_4–W_7 have none. The LayerNorms
  keep their gain and bias. W_6 and W_7 map to d, the size of the token embeddings y_j is scored
  against. The relative position embedding p has ``bem_position_dim`` = 200 components (§4.1)
  and ``bem_max_positions`` rows; positions beyond the last row use the last row.
* Eq. 6 writes p_{j−s_ato} and Eq. 7 p_{j−s_adj}; the position that identifies the token to
  predict is its offset inside the masked part, j − s_m (SpanBERT's SBO, which §3.3 follows).
* Losses are means over their targets (Eq. 5 and 8 write sums) so that the λs do not depend on
  sequence length or batch composition; the trainer's exact accumulation weights the means by
  the targets each micro-batch holds (``Batch.target_counts``).
* L_ex, "the existing loss function used in BERT", is MLM here (``use_sop=True`` adds SOP, the
  sentence-level objective kgplm uses instead of NSP). The masked part of a BEM mention is also an
  MLM target (as SpanBERT's spans are); its other part is never masked, so the states BEM reads
  see it. Tokens of a replaced mention are never masked: CECP asks about what is there.
* Replacement (the paper does not say how many or which mentions): each mention whose entity has
  another surface in the mention's own script (Chinese characters or Latin letters) is replaced
  with probability ``cecp_rate`` × keep(entity) (at least one per sequence that has such a
  mention), with probability 1/2 by a uniformly drawn other surface of its entity in that script
  (consistent), else (inconsistent) by a uniformly drawn non-display name in that script of another
  entity of the same type (any type when its type has no other), drawn in proportion to its capped
  corpus frequency; never a surface of the original entity, and never an entity that a KG triple
  joins to it (1-hop neighbours, either direction). Only mentions that have a synonym are
  replaced, so both labels come from the same mentions and are equally frequent. Both put
  "another name of an entity as common as the mentioned ones" into the text, so that the surface
  alone does not give the label away. The three restrictions (the "before" shares
  are the issue's review's, on CMeKG and the consultations):

  - *script*: 73% of replacement surfaces were English names inside Chinese text (英文名 is
    CMeKG's most frequent alias predicate); the surface now has the mention's script.
  - *cap*: "hypertension" alone was 21% of all replacements. ``cecp_max_entity_share`` (0.05) caps every entity's corpus
    frequency by water-filling (:func:`~kgplm.methods.embert.batching.capped_weights`): keep(e) =
    min(f_e, T) / f_e for choosing replaced mentions, min(f_e, T) for drawing inconsistent entities.
  - *neighbours*: 21% of inconsistent replacements were KG neighbours of the original, some of them
    near-synonyms labelled inconsistent (癫痫发作 → 羊癫风, an alias of its neighbour 癫痫); the
    thesaurus misses them, the 1-hop exclusion removes them.

  Measured after them (``experiments/embert_replacements.py --dialogues 1000 --repeats 2``: 1,093
  chunks of 256 tokens drawn twice, 630 replacements, 319 consistent / 311 inconsistent): 0% of
  surfaces in another script than the mention's, 0.8% Latin surfaces inside mostly-Chinese text
  (Latin mentions there, replaced in their own script); the top entities' shares of all
  replacements 4.4% (特发性癫痫综合征), 3.5%, 3.3%, 3.2%, 3.2% (the cap bounds the frequencies that
  drive the draws, not the realised shares; here they stay below 5%); 0% of
  inconsistent replacements KG neighbours or thesaurus synonyms of the original. The price is
  fewer replacements: only mentions with a synonym in their own script can be replaced (630 in
  2,186 chunk draws at ``cecp_rate`` 0.15), and CECP sees fewer targets per step than before.

  With uniformly drawn entities written with their display names (most CMeKG entities have no
  other name) the surface would tell a synonym from an obscure name; uniformly drawn entities with
  their other names gave inconsistent surfaces of 7.5 word pieces, 70% Latin, against 4.7 and 60%
  for consistent ones on 600 consultations; drawn by frequency 4.8 and 67% against 4.7 and 61%
  (before the script restriction). The replacement's word pieces are spliced in (the sequence
  changes length; every other mention keeps its tokens); surfaces holding [UNK] or longer than
  ``cecp_max_tokens`` are not used; a replacement that would make the sequence longer than the
  position embeddings is skipped, and so is an inconsistent draw that finds no allowed entity in
  32 tries.
* Which mentions are segmented: every linked mention (short ones are one sub-entity: their last
  token is positive), so the task marks mention ends everywhere and the sub-entity ends of long
  mentions — "tokens in the non-entity part of the sentence are ignored".
* BEM targets: each long mention with an atomic/adjective split (not replaced by CECP) with
  probability ``bem_rate`` (at least one per sequence that has one). The masked part goes through
  the masker's 80/10/10 replacement per token like every MLM target: about 10% of BEM's target
  tokens stay visible as themselves and 10% show a random token (20.4% of 3,713 BEM target tokens
  were not [MASK] in the benchmark above), so
  BEM is not always predicted from the other part alone. And a run of several [MASK] tokens shows
  the encoder where a masked mention part starts and ends (and how long it is): a boundary cue
  that exists at pre-training only, never at fine-tuning.
* The paper's sub-entity rules use AutoPhrase and a hand-checked cut-point set; here the KG alone
  (:mod:`kgplm.methods.embert.segments` says how the cut points are derived).
* The encoder is plain BERT (the model extends the MLM baseline's, :class:`kgplm.methods.mlm.KgplmForMaskedLM`):
  the knowledge is in the objectives, so fine-tuning needs no inputs beyond the text (as the
  paper, which fine-tunes EMBERT as a BERT).
* Ablations (Table 4): ``use_cecp``, ``use_es``, ``use_bem`` = False drop a task (head and targets).

Measured limitation
-------------------
On real text from scratch (CMeKG facts as sentences + consultations, encoder 128×2, batch 32, 300
steps) MLM, ES and BEM fall but L_CECP stays at ln 2 = 0.693 with accuracy 1/2 (0.709 → 0.694 over
the 300 steps): with replacements that are surfaces of equally common entities of the same type,
only knowing which names are synonyms of the mention the context was written about separates the
labels, and a small encoder trained from scratch for a few hundred steps does not know that. The
paper starts from BERT-base or MC-BERT (Table 3), trained for ten days; the construction from a
pre-trained base belongs to the replication run. CECP itself is learnable
(``tests/methods/test_embert_training.py``): a positive control whose inconsistent
replacements all share one surface learns to > 90% in 150 steps, and on a toy corpus where each
entity is named twice and the second mention is replaced, so that only the context fixes the
label, the tiny encoder leaves chance (held-out accuracy on 512 sequences, chance 0.5 ± 0.022:
2 entities × 200 steps 1.00, 4 × 400 0.94; at half those steps 0.58 and 0.54, still near chance;
the fixed-surface control 1.00 at 150 steps). On real text the same control is
``model_options={"cecp_negatives": "fixed_surface"}`` (every inconsistent replacement one surface; a
diagnostic, not the paper's method); ``experiments/embert_cecp.py`` trains it beside the shipped
negatives, both continued from the replication run's MLM base.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from kgplm.methods.embert.configuration import EmbertConfig
from kgplm.methods.mlm import BERT_ENCODING, KgplmForMaskedLM
from kgplm.models.modules import PretrainingOutput, mention_token_index
from kgplm.models.objectives import classification_objective

__all__ = ["ConsistencyHead", "SegmentationHead", "BidirectionalMaskingHead", "EmbertForPreTraining"]


class ConsistencyHead(nn.Module):
    """Eq. 1–3: logits of (inconsistent, consistent) from the states just outside a replaced mention."""

    def __init__(self, config: EmbertConfig) -> None:
        super().__init__()
        self.transform = nn.Linear(2 * config.hidden_size, config.hidden_size, bias=False)  # W_1
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.classifier = nn.Linear(config.hidden_size, 2, bias=False)  # W_2

    def forward(self, before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
        """``before`` = x_{s−1}, ``after`` = x_{e+1}, each (mentions, d) → (mentions, 2)."""
        y = self.norm(F.gelu(self.transform(torch.cat([before, after], dim=-1))))
        return self.classifier(y)


class SegmentationHead(nn.Module):
    """Eq. 4–5: logits of (inside, last token of a sub-entity) per token."""

    def __init__(self, config: EmbertConfig) -> None:
        super().__init__()
        self.transform = nn.Linear(config.hidden_size, config.hidden_size, bias=False)  # W_4
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)  # W_3 and b
        self.classifier = nn.Linear(config.hidden_size, 2, bias=False)  # W_5

    def forward(self, token_states: torch.Tensor) -> torch.Tensor:
        """(tokens, d) → (tokens, 2)."""
        y = torch.tanh(self.dense(self.norm(F.gelu(self.transform(token_states)))))
        return self.classifier(y)


class BidirectionalMaskingHead(nn.Module):
    """Eq. 6–8: y_j from the visible part's boundary states and the relative position of token j."""

    def __init__(self, config: EmbertConfig) -> None:
        super().__init__()
        self.positions = nn.Embedding(config.bem_max_positions, config.bem_position_dim)  # p
        self.first = nn.Linear(2 * config.hidden_size + config.bem_position_dim, config.hidden_size, bias=False)  # W_6
        self.first_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.second = nn.Linear(config.hidden_size, config.hidden_size, bias=False)  # W_7
        self.second_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(
        self, start_states: torch.Tensor, end_states: torch.Tensor, relative_positions: torch.Tensor
    ) -> torch.Tensor:
        """``start_states`` x_{s_o}, ``end_states`` x_{e_o} (targets, d); ``relative_positions`` j − s_m (targets,)
        → y_j (targets, d)."""
        rows = relative_positions.clamp(0, self.positions.num_embeddings - 1)
        h0 = torch.cat([start_states, end_states, self.positions(rows)], dim=-1)  # (targets, 2d + 200)
        h1 = self.first_norm(F.gelu(self.first(h0)))
        return self.second_norm(F.gelu(self.second(h1)))


class EmbertForPreTraining(KgplmForMaskedLM):
    """The MLM baseline's model (BERT, MLM head, SOP head when ``use_sop``) plus the heads of CECP, ES and BEM
    (those the config switches on)."""

    config_class = EmbertConfig

    def __init__(self, config: EmbertConfig) -> None:
        config.validate_tasks()
        super().__init__(config)
        self.consistency = ConsistencyHead(config) if config.use_cecp else None
        self.segmentation = SegmentationHead(config) if config.use_es else None
        self.bidirectional_masking = BidirectionalMaskingHead(config) if config.use_bem else None
        self.post_init()  # initialises the heads added after the base's post_init

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        sentence_order_label: torch.Tensor | None = None,
        cecp_batch: torch.Tensor | None = None,
        cecp_spans: torch.Tensor | None = None,
        cecp_labels: torch.Tensor | None = None,
        es_labels: torch.Tensor | None = None,
        bem_batch: torch.Tensor | None = None,
        bem_context_spans: torch.Tensor | None = None,
        bem_target_spans: torch.Tensor | None = None,
    ) -> PretrainingOutput:
        """Spans are token ``[start, end)``; ``cecp_labels`` 1 = consistent (synonym), 0 = inconsistent;
        ``es_labels`` (batch, length) 1 / 0 / −100; BEM's masked tokens take their targets from ``labels``."""
        config = self.config
        output = super().forward(input_ids, attention_mask, token_type_ids, labels, sentence_order_label)  # MLM, SOP
        hidden = output.last_hidden_state  # (batch, length, d)
        if self.consistency is not None and cecp_labels is not None and len(cecp_labels):
            before = hidden[cecp_batch, cecp_spans[:, 0] - 1]  # x_{s−1}, (mentions, d)
            after = hidden[cecp_batch, cecp_spans[:, 1]]  # x_{e+1} (spans are end-exclusive)
            output.add(
                "cecp", classification_objective(self.consistency(before, after), cecp_labels), config.cecp_weight
            )
        if self.segmentation is not None and es_labels is not None:
            scored = es_labels >= 0  # (batch, length)
            output.add(
                "es", classification_objective(self.segmentation(hidden[scored]), es_labels[scored]), config.es_weight
            )
        if (
            self.bidirectional_masking is not None
            and labels is not None
            and bem_target_spans is not None
            and len(bem_target_spans)
        ):
            target, token_batch, token_position = mention_token_index(bem_batch, bem_target_spans)
            states = self.bidirectional_masking(
                hidden[token_batch, bem_context_spans[target, 0]],  # x_{s_o}
                hidden[token_batch, bem_context_spans[target, 1] - 1],  # x_{e_o}
                token_position - bem_target_spans[target, 0],
            )  # j − s_m
            word_logits = states @ BERT_ENCODING.word_embeddings(self).weight.T  # (targets, vocab)
            output.add(
                "bem", classification_objective(word_logits, labels[token_batch, token_position]), config.bem_weight
            )
        return output
