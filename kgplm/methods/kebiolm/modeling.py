"""KeBioLM: entity detection and linking inside the encoder, text–entity fusion.

Paper: Yuan, Liu, Tan, Huang and Huang (2021), "Improving Biomedical Pretrained Language Models
with Knowledge", BioNLP 2021, §3 and §4.1; it follows Entities as Experts (Févry et al., EMNLP 2020).
Authors' code: github.com/GanjinZero/KeBioLM (the model, no pre-training script).

Notation: x_1..x_n the tokens, h_i token states (d1 = hidden size), e_j the entity table
(d_e = entity_dim, initialised from TransE), m = [s, t) a mention as a half-open token span, so
its boundary tokens are s and t − 1 (the paper writes m = (s, t) with t the last token).

Equations implemented
---------------------
Text-only encoding (Eq. 1–2), l0 = ``config.layer_split[0]`` layers:
    h_1..h_n = Transformers⁰(x_1..x_n);  p(l_i | x) = softmax(W_l h_i + b_l),  l_i ∈ {O, B, I}
Mention representation and retrieval (§3.1, Eq. 3):
    h_m = [h_s; h_{t−1}];  h'_m = W_m h_m + b_m  (d_e)
    E' = the k entities with the largest h'_m · e_j (k = ``num_retrieved`` = 100)
    a_j = exp(h'_m · e_j) / Σ_{e_k ∈ E'} exp(h'_m · e_k);  e'_m = Σ_{e_j ∈ E'} a_j e_j
Fusion (Eq. 4–5), l1 = ``config.layer_split[1]`` layers:
    h*_i = h_i + W_e e'_m + b_e  for the tokens i ∈ [s, t) of a mention m;  h*_i = h_i elsewhere
    h^f_1..h^f_n = Transformers¹(h*_1..h*_n)
Objectives (Eq. 6–10):
    L = L_MLM + L_ED + L_EL
    L_MLM = −mean log p_M(x_i | x) over the masked tokens, p_M the MLM head on h^f (BERT's, tied)
    L_ED  = −mean log p(l_i | x) over the real tokens (special tokens and padding not scored)
    L_EL  = −mean over mentions of log exp(h'_m · e_gold) / Σ_{e_j ∈ E} exp(h'_m · e_j)
Masking (§3.2, "we mask all tokens within a word or entity span"): ``default_masking="word_entity"``:
each linked mention is one unit and every word outside the mentions (jieba words, ``word_ids``) is
one unit; 15% of units are chosen, of whose tokens 80% → [MASK], 10% → a random token, 10% kept —
the paper's 12% / 1.5% / 1.5% (:mod:`kgplm.text.masking`). The −wem ablation (§4.5 (a), registered
as ``no_whole_entity_masking``) keeps whole-word masking and drops the entity units
(``masking="whole_word"``). KeBioLM used to use ``whole_entity``, which masks the
tokens outside mentions one by one (a two-character word half masked), not as the paper does.

Which mentions (the paper via EAE; its text does not spell it out): at pre-training the linker's
mentions (:mod:`kgplm.text.linking`, at most ``max_mentions`` = 50 per sequence as in §4.1) are the
gold mention boundaries for ED, the gold entities for EL, and the mentions that are retrieved for and
fused — EAE's teacher forcing. At fine-tuning and inference the encoder uses the spans its own
detection head predicts (argmax of Eq. 2, decoded on the tensor side, :mod:`.detection`), so it
needs no input beyond the text.

Deviations and choices
----------------------
* Spans are half-open and exact: the reference code fills one token too many per span (its end is
  inclusive but used as exclusive + 1) and pads each sequence's mention list with (0, 0) slots that
  write the fused entity of nothing into [CLS]. Here mentions are a flat list (PyG style, no
  padding) and fusion touches exactly the tokens [s, t).
* Retrieval and L_EL are chunked over the entity table (:mod:`.retrieval`): the reference code
  scores every entity with a full linear layer, memory (batch · mentions × entities). The top-k is
  exact; the k selected entities' scores are recomputed with gradients, so the query and the
  retrieved rows are trained through e'_m (the selection itself is discrete). L_EL's full
  softmax is exact (the default); its normaliser comes from the search's own pass over the table and its
  backward recomputes each chunk, so no (mentions × entities) matrix is held at once.
  ``linking_softmax="sampled"`` is an approximation for very large tables on small hardware (issue
  30.5): each mention's k retrieved entities and the batch's golds scored exactly, the other
  entities estimated from uniform draws with the log-Q correction,
      L̂_EL = mean_m [ log( Σ_{j ∈ D_m} e^{s_j} + Σ_{r_i ∉ D_m} e^{s_{r_i} − log(R/|E|)} ) − s_gold ]
  (the equation and its bias in :mod:`.retrieval`); ``"in_batch"`` scores the batch's golds only.
  Under either approximation the table's gradient is sparse (the rows read) and the pre-training
  optimiser updates those rows only, lazily (:mod:`kgplm.training.optimizer`: untouched rows keep
  their value and moments, no weight decay), where the exact softmax's dense gradient has AdamW
  rewrite every row on every step. The top-k search still reads the whole table (chunked, no gradient).
* Losses are means (over masked tokens, scored tokens, mentions) instead of the paper's sums, so
  that the three terms do not scale with batch composition; ``ed_weight``/``el_weight`` (1, 1)
  keep the paper's unweighted sum of the means.
* The detection head is scored on every real token (mentions masked or not). Special tokens are
  not candidates at decoding: position 0 and the [SEP] that ends each segment (found from the
  attention mask and token types, so the encoder needs no token ids of the tokenizer).
* Random-init ablation (``entity_init="random"``): rows uniform on the unit sphere, the scale of
  TransE's normalised entity vectors. Frozen ablation (``freeze_entity_embeddings=True``): the
  table is a saved buffer, so it stays fixed after loading too, also at fine-tuning.
* The fine-tuning model's [CLS] pooler is newly initialised (pre-training has no sentence task).

Attribution switches (not in the paper; they split its gain into "learned to find mentions" and
"used the entities"): ``entity_linking=False, entity_fusion=False`` builds only ``bert`` and the
detection head W_l — L = L_MLM + L_ED, the encoder's output is the plain text encoding;
``entity_fusion=False`` builds everything but W_e — L = L_MLM + L_ED + L_EL with the mention
projection and the entity table trained by L_EL, and Transformers¹ reads h_i unchanged, so the
token states do not depend on the entity table.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers.models.bert.modeling_bert import BertModel, BertOnlyMLMHead

from kgplm.exceptions import ConfigurationError
from kgplm.methods.kebiolm.configuration import KebiolmConfig
from kgplm.methods.kebiolm.detection import TAG_NAMES, candidate_positions, decode_spans
from kgplm.methods.kebiolm.retrieval import linking_loss, top_k_by_dot_product
from kgplm.models.encoding import EncoderOutput, Encoding
from kgplm.models.modules import (
    MLM_HEAD_TIED_WEIGHTS,
    KgplmPreTrainedModel,
    PretrainingOutput,
    extended_attention_mask,
    mention_token_index,
    run_encoder_layers,
)
from kgplm.models.objectives import Objective, classification_objective, masked_lm_objective

__all__ = [
    "EntityMemory",
    "MentionProjection",
    "EntityFusion",
    "KebiolmEncoding",
    "KebiolmForPreTraining",
    "KEBIOLM_ENCODING",
]


class EntityMemory(nn.Module):
    """The entity table e_j, (num_entities, entity_dim), and the attention over its k nearest rows (Eq. 3)."""

    def __init__(self, config: KebiolmConfig) -> None:
        super().__init__()
        table = torch.empty(config.num_entities, config.entity_dim)
        if config.freeze_entity_embeddings:
            # a buffer, not a parameter with requires_grad=False: loading a checkpoint (from_pretrained)
            # makes every parameter trainable again, a buffer stays out of the optimiser
            self.register_buffer("weight", table)
        else:
            self.weight = nn.Parameter(table)
        self.num_retrieved = config.num_retrieved
        self.chunk_size = config.retrieval_chunk_size
        #: read the retrieved rows through a sparse-gradient lookup (set by the pre-training model
        #: under an approximate linking softmax: the table's gradient is then sparse over the rows read)
        self.sparse_gradients = False
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Rows uniform on the unit sphere (the scale of TransE's normalised entity vectors)."""
        self.weight.copy_(F.normalize(torch.randn_like(self.weight), dim=1))

    @torch.no_grad()
    def load_embeddings(self, embeddings) -> None:
        """Copy the entity vectors of a :class:`~kgplm.kg.embeddings.models.KGEmbeddings` (TransE) of the same graph."""
        vectors = torch.as_tensor(embeddings.entity_embeddings)
        if tuple(vectors.shape) != tuple(self.weight.shape):
            raise ConfigurationError(
                f"KG embeddings have entity table {tuple(vectors.shape)}; the model expects {tuple(self.weight.shape)}"
            )
        self.weight.copy_(vectors)

    def attend(
        self, mention_vectors: torch.Tensor, *, with_logsumexp: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """``(retrieved_ids (m, k), weights a_j (m, k), e'_m (m, d_e), logsumexp)`` for h'_m (m, d_e);
        ``logsumexp`` (m,) is log Σ_j exp(h'_m · e_j) over every entity when asked for (L_EL reuses
        the search's pass over the table), else ``None``."""
        _, retrieved, normaliser = top_k_by_dot_product(
            mention_vectors.detach(),
            self.weight.detach(),
            self.num_retrieved,
            self.chunk_size,
            with_logsumexp=with_logsumexp,
        )
        if self.sparse_gradients:
            vectors = F.embedding(retrieved, self.weight, sparse=True)  # (m, k, d_e)
        else:
            vectors = self.weight[retrieved]  # (m, k, d_e)
        scores = torch.einsum("md,mkd->mk", mention_vectors, vectors)
        weights = torch.softmax(scores, dim=-1)
        return retrieved, weights, torch.einsum("mk,mkd->md", weights, vectors), normaliser


class MentionProjection(nn.Module):
    """h'_m = W_m [h_s; h_{t−1}] + b_m for half-open spans [s, t)."""

    def __init__(self, config: KebiolmConfig) -> None:
        super().__init__()
        self.linear = nn.Linear(2 * config.hidden_size, config.entity_dim)  # W_m, b_m

    def forward(self, hidden: torch.Tensor, mention_batch: torch.Tensor, mention_spans: torch.Tensor) -> torch.Tensor:
        first = hidden[mention_batch, mention_spans[:, 0]]  # (m, d1)
        last = hidden[mention_batch, mention_spans[:, 1] - 1]
        return self.linear(torch.cat([first, last], -1))  # (m, d_e)


class EntityFusion(nn.Module):
    """Eq. 4: h*_i = h_i + W_e e'_m + b_e on the tokens [s, t) of each mention, h_i elsewhere."""

    def __init__(self, config: KebiolmConfig) -> None:
        super().__init__()
        self.linear = nn.Linear(config.entity_dim, config.hidden_size)  # W_e, b_e

    def forward(
        self,
        hidden: torch.Tensor,
        entity_vectors: torch.Tensor,
        mention_batch: torch.Tensor,
        mention_spans: torch.Tensor,
    ) -> torch.Tensor:
        token_mention, token_batch, token_position = mention_token_index(mention_batch, mention_spans)
        delta = self.linear(entity_vectors)[token_mention]  # (mention_tokens, d1)
        # under autocast the linear layer answers in bf16/fp16 while the residual stream (LayerNorm's
        # output) is fp32: the sum is taken in the stream's dtype, as BERT's own residual additions are
        delta = delta.to(hidden.dtype)
        # out of place; overlapping mentions (not produced by the linker or the decoder) would both add
        return hidden.index_put((token_batch, token_position), delta, accumulate=True)


class KebiolmEncoding(Encoding):
    """l0 text-only layers, mention detection, retrieval, fusion, l1 fusion layers.

    Builds ``bert``, ``entity_detection`` (W_l, b_l), ``mention_projection``, ``entity_memory`` and
    ``entity_fusion`` on the host (without the last three under ``entity_linking=False``, without
    ``entity_fusion`` under ``entity_fusion=False``). At fine-tuning it reads nothing beyond the text:
    the mentions are its own detections.
    """

    input_names = ()

    def build(self, host: nn.Module, config: KebiolmConfig, *, pooler: bool = True) -> None:
        config.validate_knowledge()
        host.bert = BertModel(config, add_pooling_layer=pooler)
        host.entity_detection = nn.Linear(config.hidden_size, len(TAG_NAMES))
        if config.entity_linking:
            host.mention_projection = MentionProjection(config)
            host.entity_memory = EntityMemory(config)
        if config.entity_fusion:
            host.entity_fusion = EntityFusion(config)

    def encode(
        self,
        host,
        input_ids,
        attention_mask=None,
        token_type_ids=None,
        mention_batch=None,
        mention_spans=None,
        with_logsumexp: bool = False,
    ) -> EncoderOutput:
        """Final token states; ``mention_spans`` (with ``mention_batch``) are gold mentions, else the
        detected ones are used.

        ``extras``: ``detection_logits`` (batch, length, 3), ``mention_batch`` (m,), ``mention_spans``
        (m, 2), ``mention_vectors`` h'_m (m, d_e), ``retrieved_ids`` and ``retrieval_weights`` (m, k),
        ``logsumexp`` (m,) over every entity when ``with_logsumexp`` (the pre-training model's L_EL).
        Without linking (``entity_linking=False``), and without fusion unless ``with_logsumexp``, the
        entity extras are ``None``: nothing is retrieved.
        """
        config = host.config
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        text_only, _ = config.layer_split
        embeddings = host.bert.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)  # (batch, length, d1)
        mask = extended_attention_mask(config, embeddings, attention_mask)
        layers = host.bert.encoder.layer
        hidden = run_encoder_layers(layers[:text_only], embeddings, mask)
        detection_logits = host.entity_detection(hidden)  # (batch, length, 3)
        if mention_spans is None:
            with torch.no_grad():
                mention_batch, mention_spans = decode_spans(
                    detection_logits.argmax(-1), candidate_positions(attention_mask, token_type_ids)
                )
        extras = {
            "detection_logits": detection_logits,
            "mention_batch": mention_batch,
            "mention_spans": mention_spans,
            "mention_vectors": None,
            "retrieved_ids": None,
            "retrieval_weights": None,
            "logsumexp": None,
        }
        # without fusion the retrieval feeds L_EL only, which asks for the normaliser (``with_logsumexp``):
        # elsewhere (fine-tuning, inference) its result would change nothing, so it is not run
        retrieve = config.entity_linking and (config.entity_fusion or with_logsumexp)
        if retrieve and len(mention_spans):
            mention_vectors = host.mention_projection(hidden, mention_batch, mention_spans)  # (m, d_e)
            retrieved, weights, entity_vectors, normaliser = host.entity_memory.attend(
                mention_vectors, with_logsumexp=with_logsumexp
            )
            if config.entity_fusion:
                hidden = host.entity_fusion(hidden, entity_vectors, mention_batch, mention_spans)
            extras.update(
                mention_vectors=mention_vectors,
                retrieved_ids=retrieved,
                retrieval_weights=weights,
                logsumexp=normaliser,
            )
        hidden = run_encoder_layers(layers[text_only:], hidden, mask)  # (batch, length, d1)
        return EncoderOutput(hidden, extras)


KEBIOLM_ENCODING = KebiolmEncoding()


class KebiolmForPreTraining(KgplmPreTrainedModel):
    """The KeBioLM encoder with the MLM head on the fused states, the detection and linking losses.

    Inputs beyond BERT's (see :class:`kgplm.methods.kebiolm.batching.KebiolmCollator`):
    ``mention_batch`` (m,), ``mention_spans`` (m, 2) token [start, end), ``mention_entity_ids`` (m,)
    the linker's gold mentions; ``detection_labels`` (batch, length) B/I/O tags, −100 not scored.
    Without ``mention_spans`` the model uses its own detections (the cloze probe, inference).
    """

    config_class = KebiolmConfig
    _tied_weights_keys = dict(MLM_HEAD_TIED_WEIGHTS)

    def __init__(self, config: KebiolmConfig) -> None:
        super().__init__(config)
        KEBIOLM_ENCODING.build(self, config, pooler=False)
        # the approximate softmaxes touch a few rows of the table: their gradient is sparse, and the
        # trainer's RowwiseAdamW updates those rows only (pre-training only: fine-tuning stays dense)
        if config.entity_linking:
            self.entity_memory.sparse_gradients = config.linking_softmax != "full"
        self.cls = BertOnlyMLMHead(config)
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        mention_batch: torch.Tensor | None = None,
        mention_spans: torch.Tensor | None = None,
        mention_entity_ids: torch.Tensor | None = None,
        detection_labels: torch.Tensor | None = None,
    ) -> PretrainingOutput:
        config = self.config
        # the full softmax's normaliser comes from the search's pass over the table: L_EL's under the
        # exact softmax, the exact value logged beside the approximate L_EL otherwise
        encoded = KEBIOLM_ENCODING.encode(
            self,
            input_ids,
            attention_mask,
            token_type_ids,
            mention_batch,
            mention_spans,
            with_logsumexp=mention_entity_ids is not None and config.entity_linking,
        )
        hidden, extras = encoded.last_hidden_state, encoded.extras
        prediction_logits = self.cls(hidden)  # (batch, length, vocab)
        output = PretrainingOutput(
            prediction_logits=prediction_logits,
            last_hidden_state=hidden,
            mention_vectors=extras["mention_vectors"],
            losses={},
            loss_weights={},
            metrics={},
        )
        if labels is not None:
            output.add("mlm", masked_lm_objective(prediction_logits, labels))
        if detection_labels is not None:
            output.add(
                "ed",
                classification_objective(extras["detection_logits"].flatten(0, 1), detection_labels.flatten()),
                config.ed_weight,
            )
        if (
            config.entity_linking
            and mention_entity_ids is not None
            and len(mention_entity_ids)
            and extras["mention_vectors"] is not None
        ):
            output.add("el", self._linking_objective(extras, mention_entity_ids), config.el_weight)
            if config.linking_softmax != "full":
                output.metrics["el_exact_loss"] = self._exact_linking_loss(extras, mention_entity_ids)
        return output

    @torch.no_grad()
    def _exact_linking_loss(self, extras: dict, gold: torch.Tensor) -> torch.Tensor:
        """Eq. 10's exact value (no gradient) from the search's normaliser: what an approximate
        ``linking_softmax`` estimates, logged as ``el_exact_loss`` to watch the approximation."""
        queries = extras["mention_vectors"].float()
        gold_scores = (queries * self.entity_memory.weight[gold].float()).sum(-1)
        return (extras["logsumexp"].float() - gold_scores).mean()

    def _linking_objective(self, extras: dict, gold: torch.Tensor) -> Objective:
        """Eq. 10; accuracy: the gold entity is the nearest of all (the retrieval's first row)."""
        config = self.config
        loss = linking_loss(
            extras["mention_vectors"],
            self.entity_memory.weight,
            gold,
            softmax=config.linking_softmax,
            chunk_size=config.retrieval_chunk_size,
            num_negatives=config.linking_negatives,
            logsumexp=extras["logsumexp"],
            retrieved=extras["retrieved_ids"],
            sparse=self.entity_memory.sparse_gradients,
        )
        accuracy = (extras["retrieved_ids"][:, 0] == gold).float().mean()
        return Objective(loss, accuracy.detach(), len(gold))
