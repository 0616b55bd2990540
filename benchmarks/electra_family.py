"""The ELECTRA family on real text: every logged loss, and what product attribute prediction teaches (PAP AUC).

Rows come from the method registry: every method whose model is an ELECTRA generator/discriminator
pair (:class:`kgplm.models.electra.KgplmForReplacedTokenDetection`) and its fair control (plain
ELECTRA with the same masking and replacement fractions), all pre-trained on the same real text —
CMeKG facts written as sentences + the Chinese medical dialogue corpus (``_data.py``) — with one
vocabulary, the same encoder size, steps, batch and seeds.

1. Loss curves: each logged loss of each row, first and last logging window (means over seeds).

2. PAP AUC, for the methods that train on product attributes (their record needs the
   ``product_attributes`` artefact) against their control. A held-out set of (drug, 适应症) pairs
   from CMeKG — one indication of each of ``--held-out`` drugs that have at least two — is removed
   from the PAP training triples (``method_data={"exclude_attributes": ...}``) and from the text
   (every fact sentence naming a held-out drug and its held-out indication is dropped). Each
   held-out pair is scored against ``--negatives`` random indications of the same attribute that
   the drug does not have (anywhere in CMeKG), by d(t, n, v) (lower = more likely true), and the
   AUC of true pairs vs those is reported (chance 0.5) with three scorers:

   * head — the model's own f(E(t ⊕ n)), f(E(v)) (the PAP head; the control has none);
   * probe — D frozen; a fresh pooler + f trained with the PAP loss on the training 适应症 triples
     (``--probe-steps`` steps of 16 groups) on D's [CLS] states: the same budget for every encoder;
   * zero-shot — ‖h_[CLS](t ⊕ n) − h_[CLS](v)‖₁ on D's raw [CLS] states, no training.

   Mean ± std over seeds (each seed: its own pre-training and probe).

    .venv/bin/python benchmarks/electra_family.py [--steps 400 --seeds 0 1 --pap-probability 0.05 0.5 --hidden 128 --layers 4 --methods epplm]

CPU budget; the lead machine is shared, so timings printed are wall-clock under that load.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from _data import cmekg_store, dialogues  # noqa: E402  (benchmarks/ is the script's directory)

ATTRIBUTE = "适应症"


def family_rows(pap_probabilities: list[float], methods: list[str] | None = None) -> dict[str, dict]:
    """Row name → kgplm.train arguments, from the registry (ELECTRA-family methods and their controls;
    only ``methods`` and their controls when given)."""
    from kgplm.methods import available, get
    from kgplm.models.electra import KgplmForReplacedTokenDetection

    rows = {}
    for name in available():
        spec = get(name)
        if not issubclass(spec.model_class, KgplmForReplacedTokenDetection) or spec.control is None:
            continue
        if methods and name not in methods:
            continue
        if spec.needs("product_attributes"):
            for probability in pap_probabilities:
                rows[f"{name} ρ={probability:g}"] = {"method": name, "pap": True,
                                                     "model_options": {"pap_probability": probability}}
        else:
            rows[name] = {"method": name}
        control = spec.control
        rows[f"{name} control: {control.method}"] = {"method": control.method, "masking": control.masking,
                                                     "model_options": dict(control.model_options),
                                                     "control_of_pap": spec.needs("product_attributes")}
    return rows


def held_out_pairs(attributes, count: int, seed: int) -> list[tuple[str, str]]:
    """One indication of each of ``count`` drugs that have at least two (so the drug stays in training)."""
    groups = [g for g in attributes.groups if g.attribute == ATTRIBUTE and len(g.values) >= 2]
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(groups), size=min(count, len(groups)), replace=False)
    return [(groups[i].title, groups[i].values[int(rng.integers(len(groups[i].values)))]) for i in sorted(chosen)]


def negative_pairs(attributes, held_out, per_pair: int, seed: int) -> list[tuple[str, str]]:
    """``per_pair`` random indications per held-out drug that CMeKG does not give it."""
    true = {(g.title, v) for g in attributes.groups if g.attribute == ATTRIBUTE for v in g.values}
    pool = [attributes.values[i] for i in attributes.pool(ATTRIBUTE)]
    rng = np.random.default_rng(seed + 1)
    pairs = []
    for title, _ in held_out:
        drawn = 0
        while drawn < per_pair:
            value = pool[int(rng.integers(len(pool)))]
            if (title, value) not in true:
                pairs.append((title, value))
                drawn += 1
    return pairs


def build_corpus(work: Path, store, held_out, num_facts: int, num_dialogues: int) -> Path:
    from kgplm.demo import verbalize_triples

    path = work / "corpus.txt"
    if not path.is_file():
        facts = verbalize_triples(store, num_facts)
        kept = [s for s in facts if not any(t in s and v in s for t, v in held_out)]
        logging.info("corpus: %d fact sentences (%d dropped for naming a held-out pair) + %d dialogues",
                     len(kept), len(facts) - len(kept), num_dialogues)
        path.write_text("\n".join(kept + dialogues(num_dialogues)), encoding="utf-8")
    return path


def pretrain(work: Path, store, corpus: Path, rows: dict, steps: int, seeds: list[int], exclude: Path,
             text_model: dict, max_length: int) -> dict:
    import kgplm

    runs: dict[str, list[Path]] = {}
    tokenizer = None
    for row, options in rows.items():
        for seed in seeds:
            slug = "".join(c if c.isalnum() else "-" for c in row)
            output = work / f"pretrain-{slug}-{steps}-h{text_model['hidden_size']}-l{max_length}-{seed}"
            started = time.perf_counter()
            kgplm.train(options["method"], graph=store, corpus=corpus, output_dir=output,
                        text_model=dict(text_model), tokenizer=tokenizer, vocab_size=8000,
                        masking=options.get("masking"), model_options=options.get("model_options"),
                        method_data={"exclude_attributes": str(exclude)} if options.get("pap") else None,
                        max_steps=steps, batch_size=16, learning_rate=1e-3, log_every=steps // 10,
                        checkpoint_every=steps, max_length=max_length, seed=seed, progress=False)
            tokenizer = tokenizer or output / "tokenizer"  # one vocabulary for every row
            logging.info("%s seed %d: %.0f s", row, seed, time.perf_counter() - started)
            runs.setdefault(row, []).append(output)
    return runs


def curves(run: Path) -> dict[str, tuple[float, float]]:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    names = [k for k in records[-1] if k not in ("step", "learning_rate") and not k.endswith("accuracy")]
    result = {}
    for name in names:
        values = [r[name] for r in records if name in r]
        result[name] = (values[0], values[-1])
    return result


# -- PAP scoring -----------------------------------------------------------------------------------------------
@torch.no_grad()
def encode(model, tokenizer, first: list[str], second: list[str] | None = None, *, head: bool,
           batch_size: int = 256) -> torch.Tensor:
    """D's [CLS] states (head=False) or the PAP head's f(E(·)) (head=True) of texts or text pairs, (n, H)."""
    model.eval()
    parts = []
    for start in range(0, len(first), batch_size):
        texts = first[start: start + batch_size]
        pairs = second[start: start + batch_size] if second is not None else None
        encoded = tokenizer(texts, pairs, truncation=True, max_length=64 if pairs else 20, padding=True,
                            return_tensors="pt")
        token_types = encoded.get("token_type_ids")
        if head:
            parts.append(model.encode_texts(encoded["input_ids"], encoded["attention_mask"], token_types))
        else:
            parts.append(model.discriminate(encoded["input_ids"], encoded["attention_mask"], token_types)[:, 0])
    return torch.cat(parts)


def auc(positive: np.ndarray, negative: np.ndarray) -> float:
    """P(score of a true pair > score of a false one), ties counting ½ (Mann–Whitney)."""
    from scipy.stats import rankdata

    ranks = rankdata(np.concatenate([positive, negative]))
    return float((ranks[: len(positive)].sum() - len(positive) * (len(positive) + 1) / 2) / (len(positive) * len(negative)))


def pair_scores(query: torch.Tensor, value: torch.Tensor) -> np.ndarray:
    return (-(query - value).abs().sum(-1)).numpy()  # −d: higher = more likely true


def probe_auc(model, tokenizer, attributes, evaluation, probe_steps: int, seed: int) -> float:
    """A fresh pooler + f on frozen [CLS] states, trained with the PAP loss on the training 适应症 groups."""
    from kgplm.methods.epplm import attribute_distances, product_attribute_objective

    groups = [g for g in attributes.groups if g.attribute == ATTRIBUTE and len(attributes.pool(ATTRIBUTE)) > len(g.values)]
    lookup = {(g.title, g.attribute): i for i, g in enumerate(attributes.groups)}
    group_ids = [lookup[(g.title, g.attribute)] for g in groups]
    query_states = encode(model, tokenizer, [g.title for g in groups], [ATTRIBUTE] * len(groups), head=False)
    value_states = encode(model, tokenizer, list(attributes.values), head=False)
    hidden = query_states.shape[1]
    torch.manual_seed(seed)
    probe = torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, hidden),
                                torch.nn.GELU())
    optimizer = torch.optim.Adam(probe.parameters(), lr=1e-3)
    rng = np.random.default_rng(seed)
    pool = attributes.pool(ATTRIBUTE)
    for _ in range(probe_steps):
        rows, values, labels, members = [], [], [], []
        for row, choice in enumerate(rng.integers(len(groups), size=16)):
            positives = attributes.value_ids(group_ids[choice])
            if len(positives) > 20:
                positives = rng.choice(positives, size=20, replace=False)
            others = np.setdiff1d(pool, attributes.value_ids(group_ids[choice]), assume_unique=True)
            negatives = others[rng.integers(len(others), size=2 * len(positives))]
            both = np.concatenate([positives, negatives])
            rows.append(choice)
            members.append(np.full(len(both), row))
            values.append(both)
            labels.append(np.concatenate([np.ones(len(positives)), np.zeros(len(negatives))]))
        queries = probe(query_states[rows])
        value_ids = torch.from_numpy(np.concatenate(values))
        member = torch.from_numpy(np.concatenate(members))
        distances = attribute_distances(queries, probe(value_states[value_ids]), member, torch.arange(len(value_ids)))
        loss = product_attribute_objective(distances, member, torch.from_numpy(np.concatenate(labels)), 4.0).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        return score_pairs(lambda first, second: probe(encode(model, tokenizer, first, second, head=False)), evaluation)


def score_pairs(encoder, evaluation) -> float:
    (positives, negatives) = evaluation
    scores = []
    for pairs in (positives, negatives):
        query = encoder([t for t, _ in pairs], [ATTRIBUTE] * len(pairs))
        value = encoder([v for _, v in pairs], None)
        scores.append(pair_scores(query, value))
    return auc(*scores)


def pap_table(runs: dict, rows: dict, attributes, evaluation, probe_steps: int, work: Path) -> dict:
    from kgplm.models import load_pretrained
    from kgplm.text.tokenization import load_tokenizer

    cache = work / "pap_auc.json"
    table = json.loads(cache.read_text(encoding="utf-8")) if cache.is_file() else {}
    for row, paths in runs.items():
        if not (rows[row].get("pap") or rows[row].get("control_of_pap")):
            continue
        for seed, path in enumerate(paths):
            key = f"{path.name}:{probe_steps}"
            if key in table:
                continue
            model = load_pretrained(path / "model")
            tokenizer = load_tokenizer(path / "tokenizer")
            result = {"zero-shot": score_pairs(lambda a, b: encode(model, tokenizer, a, b, head=False), evaluation),
                      "probe": probe_auc(model, tokenizer, attributes, evaluation, probe_steps, seed)}
            if rows[row].get("pap"):
                result["head"] = score_pairs(lambda a, b: encode(model, tokenizer, a, b, head=True), evaluation)
            table[key] = result
            cache.write_text(json.dumps(table), encoding="utf-8")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--pap-probability", type=float, nargs="+", default=[0.05, 0.5])
    parser.add_argument("--facts", type=int, default=3000)
    parser.add_argument("--dialogues", type=int, default=3000)
    parser.add_argument("--held-out", type=int, default=300)
    parser.add_argument("--negatives", type=int, default=4)
    parser.add_argument("--probe-steps", type=int, default=300)
    parser.add_argument("--hidden", type=int, default=128, help="D's hidden size (G's is a third)")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--methods", nargs="+", help="only these ELECTRA-family methods (and their controls)")
    parser.add_argument("--work", type=Path, default=Path(__file__).resolve().parent / ".cache" / "electra_family")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    started = time.perf_counter()
    from kgplm.methods.epplm import AttributeGroup, ProductAttributes

    args.work.mkdir(parents=True, exist_ok=True)
    store = cmekg_store(args.work)
    attributes = ProductAttributes.from_store(store)
    held_out = held_out_pairs(attributes, args.held_out, 0)
    exclude_path = args.work / "held_out.tsv"
    ProductAttributes([AttributeGroup(t, ATTRIBUTE, (v,)) for t, v in held_out]).write_table(exclude_path)
    evaluation = (held_out, negative_pairs(attributes, held_out, args.negatives, 0))
    corpus = build_corpus(args.work, store, held_out, args.facts, args.dialogues)
    rows = family_rows(args.pap_probability, args.methods)
    text_model = dict(hidden_size=args.hidden, num_hidden_layers=args.layers,
                      num_attention_heads=max(1, args.hidden // 32), intermediate_size=4 * args.hidden,
                      max_position_embeddings=512)
    runs = pretrain(args.work, store, corpus, rows, args.steps, args.seeds, exclude_path, text_model, args.max_length)

    print(f"\nELECTRA family on real text: {args.steps} steps, batch 16 of ≤ {args.max_length} tokens, hidden {args.hidden}, {args.layers} layers, "
          f"seeds {args.seeds}; "
          f"each logged loss, first → last logging window (mean over seeds)")
    for row, paths in runs.items():
        per_seed = [curves(path) for path in paths]
        cells = []
        for name in per_seed[0]:
            first = statistics.mean(c[name][0] for c in per_seed)
            last = statistics.mean(c[name][1] for c in per_seed)
            cells.append(f"{name} {first:.3f} → {last:.3f}")
        print(f"  {row}: " + ", ".join(cells))

    training = attributes.without([(t, ATTRIBUTE, v) for t, v in held_out])
    table = pap_table(runs, rows, training, evaluation, args.probe_steps, args.work)
    print(f"\nPAP AUC on {len(held_out)} held-out (drug, {ATTRIBUTE}) pairs of CMeKG vs {args.negatives} random "
          f"{ATTRIBUTE} values each (chance 0.500); mean ± std over seeds {args.seeds}; probe: "
          f"{args.probe_steps} steps of 16 groups on frozen D")
    header = f"{'row':<34}{'head':>16}{'probe':>16}{'zero-shot':>16}"
    print(header)
    print("-" * len(header))
    for row, paths in runs.items():
        results = [table.get(f"{path.name}:{args.probe_steps}") for path in paths]
        if not results[0]:
            continue

        def cell(name):
            values = [r[name] for r in results if name in r]
            if not values:
                return "—"
            return f"{statistics.mean(values):.3f}" + (f" ± {statistics.stdev(values):.3f}" if len(values) > 1 else "")

        print(f"{row:<34}{cell('head'):>16}{cell('probe'):>16}{cell('zero-shot'):>16}")
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
