"""kgplm's ELECTRA discriminator against Hugging Face's BERT token classifier on the same detection task (issue 28).

No generator: 15 % of the real tokens of each line are replaced by a token drawn uniformly from the
tokens the training lines use, and a discriminator is trained by binary cross-entropy to flag them —
the easiest corruption there is. ``kgplm``: D and its RTD head of
:class:`kgplm.models.electra.KgplmForReplacedTokenDetection` (``model(ids, attention).prediction_logits``);
``hf``: ``transformers.BertForTokenClassification`` with one label, the same sizes and seed. Both are
trained by the same loop (AdamW, clipping at 1, constant learning rate); the held-out ROC AUC is printed
every fifth of the run. On ``chain`` text (see ``electra_rtd_control.py``) a replacement can only be seen
by looking at the neighbours, which a tiny encoder has to learn first.

    .venv/bin/python experiments/electra_rtd_control.py --corpus chain     # makes the tokenizer
    .venv/bin/python experiments/rtd_discriminator_only.py TOKENIZER_DIR kgplm --learning-rate 1e-3 --steps 300
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

import _shared  # noqa: E402,F401  (puts benchmarks/ on the path: _data, _runs)
from _runs import code_version  # noqa: E402
from electra_rtd_control import chain_lines, roc_auc  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tokenizer")
    parser.add_argument("model", choices=["kgplm", "hf"])
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)

    from transformers import BertConfig, BertForTokenClassification

    from kgplm.models.electra import ElectraConfig, KgplmForReplacedTokenDetection
    from kgplm.text.tokenization import load_tokenizer

    print(f"commit {code_version()}")
    tokenizer = load_tokenizer(args.tokenizer)
    lines = chain_lines(3000)
    training, held_out = lines[:-256], lines[-256:]

    def encode(texts):
        encoded = tokenizer(texts, truncation=True, max_length=64, padding=True, return_tensors="pt")
        return encoded["input_ids"], encoded["attention_mask"]

    special = torch.tensor([tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id])
    seen = torch.unique(encode(training)[0])
    seen = seen[~torch.isin(seen, special)]

    def corrupt(ids, attention, generator):
        real = attention.bool() & ~torch.isin(ids, special)
        picks = (torch.rand(ids.shape, generator=generator) < 0.15) & real
        swapped = ids.clone()
        swapped[picks] = seen[torch.randint(len(seen), (int(picks.sum()),), generator=generator)]
        return swapped, swapped != ids

    sizes = dict(
        vocab_size=len(tokenizer),
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=max(1, args.hidden // 32),
        intermediate_size=4 * args.hidden,
        max_position_embeddings=128,
    )
    torch.manual_seed(0)
    if args.model == "kgplm":
        model = KgplmForReplacedTokenDetection(ElectraConfig(**sizes))

        def score(ids, attention):
            return model(ids, attention).prediction_logits
    else:
        model = BertForTokenClassification(BertConfig(**sizes, num_labels=1))

        def score(ids, attention):
            return model(input_ids=ids, attention_mask=attention).logits.squeeze(-1)

    parameters = [p for name, p in model.named_parameters() if not name.startswith("generator.")]
    optimizer = torch.optim.AdamW(parameters, lr=args.learning_rate, weight_decay=0.01)
    generator = torch.Generator().manual_seed(1)
    held_ids, held_attention = encode(held_out)
    held_corrupted, held_replaced = corrupt(held_ids, held_attention, torch.Generator().manual_seed(2))
    started = time.process_time()
    for step in range(args.steps):
        model.train()
        rows = torch.randint(len(training), (32,), generator=generator)
        ids, attention = encode([training[i] for i in rows])
        corrupted, replaced = corrupt(ids, attention, generator)
        real = attention.bool()
        loss = F.binary_cross_entropy_with_logits(score(corrupted, attention)[real], replaced[real].float())
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(parameters, 1.0)
        optimizer.step()
        if (step + 1) % max(1, args.steps // 5) == 0:
            model.eval()
            with torch.no_grad():
                logits = score(held_corrupted, held_attention)
            real = held_attention.bool()
            print(
                f"{args.model} step {step + 1}: loss {loss.item():.4f}, held-out AUC "
                f"{roc_auc(held_replaced[real].numpy(), logits[real].numpy()):.4f}",
                flush=True,
            )
    print(f"CPU seconds {time.process_time() - started:.0f}")


if __name__ == "__main__":
    main()
