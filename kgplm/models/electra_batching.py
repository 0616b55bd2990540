"""Batches of the ELECTRA family: the masking collator plus the uniforms of the generator's draws.

:class:`ElectraCollator` is the pre-training collator (masking from the text pipeline; no SOP pairs,
ELECTRA has none) that adds, for every masked token in row-major order, the uniform u ∈ [0, 1)
of G's draw (``replacement_uniforms``) and, when asked, ``candidate_draws`` more per token
(``candidate_uniforms``, eHealth's MTS candidates). All come from the example's own generator,
seeded by (seed, step, position): a corruption does not depend on the micro-batch.

``views = 2`` corrupts every example twice, independently: the rows of view 1 follow those of
view 0. View v of an example draws from a generator seeded by (seed, step, position, v). With
``contrastive=True`` (eHealth's CSP) ``view_partner`` (2·rows,) gives each row the row of its other
view and ``csp`` is counted per row; without it the two views are just twice the RTD/MLM targets
(eHealth's fair control and its ``no_csp`` ablation: the same corruptions as eHealth, CSP off).
"""

from __future__ import annotations

import numpy as np
import torch

from kgplm.exceptions import ConfigurationError
from kgplm.training.collator import Batch, PretrainingCollator, PretrainingExample

__all__ = ["ElectraCollator", "build_electra_collator"]


class ElectraCollator(PretrainingCollator):
    """:class:`~kgplm.training.collator.PretrainingCollator` plus the generator's uniforms (module docstring)."""

    def __init__(self, *, views: int = 1, contrastive: bool = False, candidate_draws: int = 0, **options) -> None:
        if views not in (1, 2):
            raise ConfigurationError(f"views must be 1 or 2, got {views}")
        if contrastive and views != 2:
            raise ConfigurationError(f"contrastive view pairs need views=2, got views={views}")
        super().__init__(**options)
        self.views = views
        self.contrastive = contrastive
        self.candidate_draws = candidate_draws

    def __call__(self, rows, example_seeds: np.ndarray) -> Batch:
        if self.views == 1:
            return super().__call__(rows, example_seeds)
        keys = np.asarray(example_seeds, dtype=np.int64).reshape(len(example_seeds), -1)
        parts = [
            super(ElectraCollator, self).__call__(rows, np.concatenate([keys, np.full((len(keys), 1), view)], 1))
            for view in range(self.views)
        ]
        size = len(keys)
        batch = Batch(
            {name: torch.cat([part[name] for part in parts]) for name in parts[0]},
            target_counts={name: sum(part.target_counts[name] for part in parts) for name in parts[0].target_counts},
        )
        if self.contrastive:
            batch["view_partner"] = torch.cat([torch.arange(size, 2 * size), torch.arange(size)])  # (2·rows,)
            batch.target_counts["csp"] = 2 * size
        return batch

    def method_inputs(
        self,
        batch: Batch,
        rows: dict,
        examples: list[PretrainingExample],
        original_ids: np.ndarray,
        labels: np.ndarray,
        rngs: list[np.random.Generator],
    ) -> None:
        counts = (labels >= 0).sum(1)  # masked tokens per row
        batch["replacement_uniforms"] = torch.from_numpy(
            np.concatenate([rng.random(int(count), dtype=np.float32) for count, rng in zip(counts, rngs)])
        )  # (masked,)
        if self.candidate_draws:
            batch["candidate_uniforms"] = torch.from_numpy(
                np.concatenate(
                    [
                        rng.random((int(count), self.candidate_draws), dtype=np.float32)
                        for count, rng in zip(counts, rngs)
                    ]
                )
            )  # (masked, draws)
            # L_MTS is divided by the masked count (kgplm.methods.ehealth.modeling): known before G samples
            batch.target_counts["mts"] = int(counts.sum())
        batch.target_counts["rtd"] = int(batch["attention_mask"].sum())


def build_electra_collator(context, cls=ElectraCollator, **options) -> ElectraCollator:
    """The collator of an ELECTRA-family method: the run's masking with the config's replacement fractions
    and the config's ``corruption_views`` (unless ``options`` sets ``views``)."""
    from kgplm.text.masking import Masker

    config, tokenizer = context.config, context.tokenizer
    options.setdefault("views", getattr(config, "corruption_views", 1))
    if options["views"] != 1 and cls.__call__ is not ElectraCollator.__call__:
        raise ConfigurationError(
            f"corruption_views={options['views']} is supported by the plain ELECTRA "
            f"collator only, not by {cls.__name__}"
        )
    masker = Masker.from_tokenizer(
        tokenizer,
        context.masking,
        seed=context.seed,
        mask_fraction=config.mask_fraction,
        random_fraction=config.random_fraction,
    )
    return cls(
        masker=masker,
        cls_token_id=tokenizer.cls_token_id,
        sep_token_id=tokenizer.sep_token_id,
        pad_token_id=tokenizer.pad_token_id,
        sentence_order=False,
        **options,
    )
