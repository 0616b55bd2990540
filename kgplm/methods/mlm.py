"""The plain baseline: a BERT encoder trained with masked language modelling (``method="mlm"``).

Devlin et al. (2019), "BERT: Pre-training of Deep Bidirectional Transformers for Language
Understanding", NAACL. Equation: L = −mean_{i masked} log p(w_i | masked text), p = softmax of the
MLM head (transform, LayerNorm, decoder tied to the word embeddings).

It is the fair control of the BERT-style knowledge methods: run with the same data, budget,
vocabulary, masking and input format, so a difference can be attributed to the knowledge. For
SMedBERT that means ``masking="whole_entity"`` and ``model_options={"use_sop": True}`` (SOP pairs
as input and L += L_SOP, Lan et al. 2020), the control the replication study in ``experiments/``
runs beside SMedBERT.
Defaults: token masking (``bert``) and no SOP (RoBERTa showed next-sentence objectives are not
needed for MLM alone).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.models.bert.modeling_bert import BertOnlyMLMHead

from kgplm.methods.registry import MethodSpec, register
from kgplm.models.configuration import KgplmConfig
from kgplm.models.encoding import Encoding
from kgplm.models.modules import (
    MLM_HEAD_TIED_WEIGHTS,
    KgplmPreTrainedModel,
    PretrainingOutput,
)
from kgplm.models.objectives import masked_lm_objective, sentence_order_objective

__all__ = ["MlmConfig", "KgplmForMaskedLM", "SPEC"]

BERT_ENCODING = Encoding()


class MlmConfig(KgplmConfig):
    """``use_sop``: add SOP pairs and the SOP loss (the fair control of SMedBERT)."""

    method_fields = ("use_sop",)

    def __init__(self, method: str = "mlm", use_sop: bool = False, **kwargs) -> None:
        super().__init__(method=method, **kwargs)
        self.use_sop = use_sop

    @classmethod
    def upgrade_legacy(cls, config_dict):
        # version 1 saved use_sop=True (a shared default) for MLM models that had no SOP head
        return dict(super().upgrade_legacy(config_dict), use_sop=False)


class KgplmForMaskedLM(KgplmPreTrainedModel):
    """BERT + MLM head (+ SOP head on the pooled [CLS] state when ``config.use_sop``)."""

    config_class = MlmConfig
    _tied_weights_keys = dict(MLM_HEAD_TIED_WEIGHTS)

    def __init__(self, config: MlmConfig) -> None:
        super().__init__(config)
        BERT_ENCODING.build(self, config, pooler=config.use_sop)
        self.cls = BertOnlyMLMHead(config)
        self.sop = nn.Linear(config.hidden_size, 2) if config.use_sop else None
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        sentence_order_label: torch.Tensor | None = None,
    ) -> PretrainingOutput:
        hidden = BERT_ENCODING.encode(self, input_ids, attention_mask, token_type_ids).last_hidden_state
        logits = self.cls(hidden)  # (batch, length, vocab)
        sop_logits = self.sop(self.bert.pooler(hidden)) if self.sop is not None else None
        output = PretrainingOutput(
            prediction_logits=logits,
            sop_logits=sop_logits,
            last_hidden_state=hidden,
            losses={},
            loss_weights={},
            metrics={},
        )
        if labels is not None:
            output.add("mlm", masked_lm_objective(logits, labels))
            if sop_logits is not None:
                output.add("sop", sentence_order_objective(sop_logits, sentence_order_label))
        return output


def build_collator(context):
    from kgplm.text.masking import Masker
    from kgplm.training.collator import PretrainingCollator

    tokenizer = context.tokenizer
    return PretrainingCollator(
        masker=Masker.from_tokenizer(tokenizer, context.masking, seed=context.seed),
        cls_token_id=tokenizer.cls_token_id,
        sep_token_id=tokenizer.sep_token_id,
        pad_token_id=tokenizer.pad_token_id,
        sentence_order=context.config.use_sop,
    )


SPEC = register(
    MethodSpec(
        name="mlm",
        summary="plain BERT masked language modelling (the baseline; use_sop and the masking make it a fair control)",
        paper="Devlin et al. (2019), BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding, "
        "NAACL",
        config_class=MlmConfig,
        model_class=KgplmForMaskedLM,
        encoding=BERT_ENCODING,
        build_collator=build_collator,
        losses=("mlm", "sop"),
        default_masking="bert",
    )
)
