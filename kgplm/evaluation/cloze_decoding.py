"""Multi-token cloze decoding: confidence-ordered beam search over a run of [MASK] tokens.

KeBioLM §4.6.2 after X-FACTR's confidence-based decoding (Jiang et al., EMNLP 2020): the input is
``[CLS] prefix [MASK]×n suffix [SEP]``; at each of the n steps every beam is run through the model,
and among all (beam, undecoded mask position, token) the B = ``beam_size`` extensions with the highest
accumulated log-probability are kept — one token is filled per step, in whatever order the model is
most confident about, not left to right. Identical fills reached in different orders are merged
(the better score kept). After n steps the B best fills remain. The refinement stage is skipped,
as in the paper. Special tokens (and [UNK]) are never predicted: they are left out of the softmax.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tqdm.auto import tqdm

from kgplm.exceptions import ConfigurationError

__all__ = ["fill_masks", "piece_surface"]


def piece_surface(pieces: Sequence[str]) -> str:
    """A WordPiece sequence as one string without spaces (``##`` continuation marks dropped), the form
    in which decoded fills and gold answers are compared."""
    return "".join(piece[2:] if piece.startswith("##") else piece for piece in pieces)


@torch.no_grad()
def fill_masks(
    model,
    tokenizer,
    contexts: Sequence[tuple[Sequence[int], Sequence[int]]],
    num_masks: int,
    *,
    beam_size: int = 5,
    batch_size: int = 64,
    device: str | torch.device = "cpu",
    progress: bool = False,
) -> list[list[tuple[tuple[int, ...], float]]]:
    """The ``beam_size`` best fills of ``num_masks`` masks for each (prefix ids, suffix ids) context.

    ``model(input_ids=, attention_mask=, token_type_ids=)`` must return ``prediction_logits``
    (batch, length, vocab). Returns per context a list of (token ids, summed log-probability), best first.
    """
    mask_id, pad_id = tokenizer.mask_token_id, tokenizer.pad_token_id
    banned = torch.tensor(sorted(set(tokenizer.all_special_ids)), device=device)
    blank = (mask_id,) * num_masks
    beams: list[list[tuple[tuple[int, ...], float]]] = [[(blank, 0.0)] for _ in contexts]
    for _step in tqdm(range(num_masks), desc=f"decode {num_masks} masks", disable=not progress, leave=False):
        rows = [(query, fill, score) for query, query_beams in enumerate(beams) for fill, score in query_beams]
        proposals: list[dict[tuple[int, ...], float]] = [{} for _ in contexts]
        for start in range(0, len(rows), batch_size):
            chunk = rows[start : start + batch_size]
            sequences = [
                [tokenizer.cls_token_id, *contexts[q][0], *fill, *contexts[q][1], tokenizer.sep_token_id]
                for q, fill, _ in chunk
            ]
            length = max(len(s) for s in sequences)
            input_ids = torch.full((len(chunk), length), pad_id, dtype=torch.long)
            attention_mask = torch.zeros((len(chunk), length), dtype=torch.long)
            for row, sequence in enumerate(sequences):
                input_ids[row, : len(sequence)] = torch.tensor(sequence)
                attention_mask[row, : len(sequence)] = 1
            first = torch.tensor([1 + len(contexts[q][0]) for q, _, _ in chunk])  # first mask position per row
            positions = first[:, None] + torch.arange(num_masks)[None, :]  # (rows, masks)
            logits = model(
                input_ids=input_ids.to(device),
                attention_mask=attention_mask.to(device),
                token_type_ids=torch.zeros_like(input_ids).to(device),
            ).prediction_logits
            if logits is None or logits.dim() != 3:
                raise ConfigurationError(
                    "the cloze probe needs a masked-LM head (prediction_logits of shape "
                    "(batch, length, vocab)); this model gives "
                    f"{None if logits is None else tuple(logits.shape)} (an ELECTRA "
                    "discriminator scores tokens as replaced or not)"
                )
            logits = logits[torch.arange(len(chunk))[:, None], positions.to(device)].float()  # (rows, masks, vocab)
            logits[..., banned] = float("-inf")
            log_probs = torch.log_softmax(logits, -1)
            decoded = torch.tensor([[token != mask_id for token in fill] for _, fill, _ in chunk], device=device)
            log_probs[decoded] = float("-inf")  # a filled position is not filled again
            vocab = log_probs.shape[-1]
            best, index = log_probs.flatten(1).topk(min(beam_size, num_masks * vocab), dim=1)  # (rows, beam)
            for row, (query, fill, score) in enumerate(chunk):
                for value, flat in zip(best[row].tolist(), index[row].tolist()):
                    if value == float("-inf"):
                        continue
                    position, token = divmod(flat, vocab)
                    new_fill = fill[:position] + (token,) + fill[position + 1 :]
                    new_score = score + value
                    if new_score > proposals[query].get(new_fill, float("-inf")):
                        proposals[query][new_fill] = new_score
        beams = [sorted(found.items(), key=lambda item: -item[1])[:beam_size] for found in proposals]
    return beams
