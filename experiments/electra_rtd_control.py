"""Does kgplm's ELECTRA discriminator learn replaced-token detection? A positive control and a scale sweep (issue 28).

The replication run's ELECTRA base ended with D at the base rate (RTD accuracy 0.867 = 1 − replaced
share). This script trains small ELECTRAs with ``kgplm.train("electra", …)`` and measures, on text held
out of training, how well D's logit separates replaced from original tokens (ROC AUC; 0.5 = chance):

* ``generator``: the diagnostic's corruption — 15 % of the real tokens chosen, 85 % of those replaced by
  [MASK], G's samples put in (``model.corrupt``); replaced = sample ≠ original;
* ``uniform``: 15 % of the real tokens replaced by tokens drawn uniformly from the vocabulary (minus the
  special tokens), with no generator involved;
* ``unigram``: 15 % of the real tokens replaced by tokens drawn from the held-out text's own tokens (its
  unigram distribution): rare tokens no longer give a replacement away, so vocabularies of two sizes compare.

Corpora: ``topics`` — every line draws its characters from one of six disjoint sets of eight, so a
replacement from another set is out of place anywhere in the line (content; the positive control);
``chain`` — a first-order chain over 24 characters with two successors each, so a replacement breaks the
transitions with its neighbours (position: a tiny encoder first has to learn to look at its neighbours);
``dialogues`` — the Chinese medical dialogues of the shared data; or a path to a text file (one document
per line). The last ``--held-out`` lines are held out of training.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/electra_rtd_control.py --corpus topics --steps 300 --learning-rate 2e-3
    OMP_NUM_THREADS=1 .venv/bin/python experiments/electra_rtd_control.py --corpus dialogues --steps 300 \\
        --rtd-weight 1 --generator-size 0.25 --learning-rate 1e-3

Each run prints the commit (``_runs.code_version``) and one JSON line of results; run directories are keyed
by every setting and the commit under ``--work``.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import time
from pathlib import Path

import numpy as np
import torch
from scipy.stats import rankdata

import _shared  # noqa: E402,F401  (puts benchmarks/ on the path: _data, _runs)
from _runs import code_version, run_directory  # noqa: E402

HERE = Path(__file__).resolve().parent
#: the synthetic corpora's alphabet: 48 characters, one token each in a WordPiece vocabulary
ALPHABET = "甲乙丙丁戊己庚辛壬癸子丑寅卯辰巳午未申酉戌亥金木水火土山川日月星云风雨雪春夏秋冬东南西北上下左右前后"


def topic_lines(count: int, seed: int = 0, topics: int = 6) -> list[str]:
    """``count`` lines of 16–48 characters, each drawn uniformly from one of ``topics`` disjoint sets of 8
    characters: a character of another set is out of place anywhere in the line (content, not position)."""
    rng = random.Random(seed)
    size = len(ALPHABET) // topics
    sets = [ALPHABET[k * size : (k + 1) * size] for k in range(topics)]
    return [
        "".join(rng.choice(chosen) for _ in range(rng.randint(16, 48)))
        for chosen in (rng.choice(sets) for _ in range(count))
    ]


def chain_lines(count: int, seed: int = 0, alphabet: str = ALPHABET[:24]) -> list[str]:
    """``count`` lines of 16–48 characters of a first-order chain over ``alphabet`` in which each character
    has two successors (chosen once, seeded), each with probability 1/2: a replacement breaks a transition
    with its neighbours (position, not content)."""
    rng = random.Random(seed)
    successors = {a: rng.sample([b for b in alphabet if b != a], 2) for a in alphabet}
    lines = []
    for _ in range(count):
        character, line = rng.choice(alphabet), []
        for _ in range(rng.randint(16, 48)):
            line.append(character)
            character = rng.choice(successors[character])
        lines.append("".join(line))
    return lines


def corpus_lines(name: str, count: int) -> list[str]:
    if name == "topics":
        return topic_lines(count)
    if name == "chain":
        return chain_lines(count)
    if name == "dialogues":
        from _data import dialogues

        return dialogues(count)
    return [line.strip() for line in Path(name).read_text(encoding="utf-8").splitlines() if line.strip()][:count]


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Mann–Whitney AUC: P(score of a positive > score of a negative), ties counted half."""
    labels = labels.astype(bool)
    positives, negatives = int(labels.sum()), int((~labels).sum())
    if not positives or not negatives:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[labels].sum() - positives * (positives + 1) / 2) / (positives * negatives))


@torch.no_grad()
def detection_scores(model, tokenizer, lines: list[str], *, max_length: int = 64, seed: int = 0) -> dict:
    """D's replaced-token detection on ``lines`` under G's corruption and under uniform replacement."""
    model.eval()
    encoded = tokenizer(lines, truncation=True, max_length=max_length, padding=True, return_tensors="pt")
    ids, attention = encoded["input_ids"], encoded["attention_mask"]
    special = {
        tokenizer.cls_token_id,
        tokenizer.sep_token_id,
        tokenizer.pad_token_id,
        tokenizer.mask_token_id,
        tokenizer.unk_token_id,
    }
    real = attention.bool() & ~torch.isin(ids, torch.tensor(sorted(special)))
    generator = torch.Generator().manual_seed(seed)
    chosen = (torch.rand(ids.shape, generator=generator) < 0.15) & real
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    masked_ids = ids.clone()
    masked_ids[chosen & (torch.rand(ids.shape, generator=generator) < 0.85)] = tokenizer.mask_token_id
    uniforms = torch.rand(int(chosen.sum()), generator=generator)
    corruption = model.corrupt(masked_ids, attention, None, labels, uniforms)
    out = {}
    scored = attention.bool()
    logits = model(corruption.corrupted_ids, attention).prediction_logits
    replaced = corruption.replaced
    out["generator"] = _summary(replaced[scored].numpy(), logits[scored].numpy())
    out["generator"]["mlm_accuracy"] = float((corruption.generator_logits.argmax(-1) == ids[chosen]).float().mean())
    allowed = torch.tensor([i for i in range(len(tokenizer)) if i not in special])
    swapped = ids.clone()
    picks = (torch.rand(ids.shape, generator=generator) < 0.15) & real
    swapped[picks] = allowed[torch.randint(len(allowed), (int(picks.sum()),), generator=generator)]
    logits = model(swapped, attention).prediction_logits
    out["uniform"] = _summary((swapped != ids)[scored].numpy(), logits[scored].numpy())
    # frequency-matched: the replacements are drawn from the text's own tokens (its unigram distribution), so
    # rare, barely trained embeddings do not give them away and two vocabulary sizes compare
    pool = ids[real]
    shuffled = ids.clone()
    picks = (torch.rand(ids.shape, generator=generator) < 0.15) & real
    shuffled[picks] = pool[torch.randint(len(pool), (int(picks.sum()),), generator=generator)]
    logits = model(shuffled, attention).prediction_logits
    out["unigram"] = _summary((shuffled != ids)[scored].numpy(), logits[scored].numpy())
    return out


def _summary(replaced: np.ndarray, logits: np.ndarray) -> dict:
    predicted = logits > 0
    return {
        "replaced_share": round(float(replaced.mean()), 4),
        "auc": round(roc_auc(replaced, logits), 4),
        "accuracy": round(float((predicted == replaced).mean()), 4),
        "constant_accuracy": round(float(1 - replaced.mean()), 4),
        "recall": round(float(predicted[replaced].mean()), 4) if replaced.any() else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="topics", help="topics, chain, dialogues, or a text file")
    parser.add_argument("--lines", type=int, default=3000, help="corpus lines (training + held out)")
    parser.add_argument("--held-out", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--vocab-size", type=int, default=3000)
    parser.add_argument("--learning-rate", type=float, default=5e-4)
    parser.add_argument("--warmup-steps", type=int, default=None)
    parser.add_argument("--rtd-weight", type=float, default=50.0)
    parser.add_argument("--mlm-weight", type=float, default=1.0, help="0 leaves the generator untrained")
    parser.add_argument("--generator-size", type=float, default=1 / 3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=HERE / ".cache" / "electra_rtd_control")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(1)

    import kgplm
    from kgplm.models import load_pretrained
    from kgplm.text.tokenization import load_tokenizer

    version = code_version()
    print(f"commit {version}")
    settings = {key: value for key, value in vars(args).items() if key != "work"}
    directory = run_directory(args.work, "electra", settings, version=version)
    lines = corpus_lines(args.corpus, args.lines)
    training, held_out = lines[: -args.held_out], lines[-args.held_out :]
    corpus = directory / "train.txt"
    corpus.write_text("\n".join(training), encoding="utf-8")
    heads = max(1, args.hidden // 32)
    started, cpu_started = time.perf_counter(), time.process_time()
    result = kgplm.train(
        "electra",
        corpus=corpus,
        output_dir=directory / "run",
        text_model={
            "hidden_size": args.hidden,
            "num_hidden_layers": args.layers,
            "num_attention_heads": heads,
            "intermediate_size": 4 * args.hidden,
            "max_position_embeddings": 128,
        },
        vocab_size=args.vocab_size,
        max_length=args.max_length,
        masking="bert",
        model_options={
            "rtd_weight": args.rtd_weight,
            "mlm_weight": args.mlm_weight,
            "generator_size": args.generator_size,
        },
        max_steps=args.steps,
        batch_size=args.batch,
        learning_rate=args.learning_rate,
        warmup_steps=args.warmup_steps,
        log_every=max(1, args.steps // 10),
        checkpoint_every=args.steps,
        seed=args.seed,
        device="cpu",
        progress=False,
    )
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    model = load_pretrained(result.output_dir / "model")
    tokenizer = load_tokenizer(result.output_dir / "tokenizer")
    scores = detection_scores(model, tokenizer, held_out, max_length=args.max_length)
    last = result.metrics[-1]
    record = {
        "settings": settings,
        "commit": version,
        "seconds": round(seconds),
        "cpu_seconds": round(cpu_seconds),
        "final_training_log": {k: round(v, 4) for k, v in last.items() if isinstance(v, float)},
        "held_out": scores,
    }
    print(json.dumps(record, ensure_ascii=False))


if __name__ == "__main__":
    main()
