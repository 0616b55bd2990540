"""The pre-registered primary endpoints of the five knowledge methods (``MethodSpec.primary_endpoints``).

Each paper's headline claim, mapped onto the tasks kgplm can score with labelled test data and the
replication runner's count metrics (:mod:`kgplm.evaluation.statistics`: entity F1, accuracy,
macro-F1). Declared before any replication number exists: changing an endpoint after seeing a
table turns the primary test into a secondary one, and the README's claim table
(:func:`kgplm.methods.registry.claim_table`) shows what was registered. Every endpoint compares the
method with its fair control (``MethodSpec.control``), paired by pre-training seed.

Where the mapping is an approximation, the endpoint's ``approximation`` says how:

* **SMedBERT** (Zhang et al. 2021): NER on cMedQANER (F1) and question matching on
  cMedQQ (accuracy) are the paper's own datasets and metrics. Its QA claim (cMedQA, WebMedQA) is
  not an endpoint: ranking tasks have no per-example counts in the runner yet.
* **KeBioLM** (Yuan et al. 2021): the claim is English BLURB NER (5 datasets, F1) and RE. kgplm
  pre-trains every method on Chinese text with CMeKG, so the NER claim maps to the Chinese NER
  tasks cMedQANER and cEHRNER (entity F1). RE has no Chinese task with labelled test data in the
  runner (CMeIE's test labels are hidden): not registered.
* **EMBERT** (Cai et al. 2021): cMedQANER (F1) is the paper's; cMedQQ is the paper's
  dataset, but the paper reports F1 where kgplm's cMedQQ is scored by accuracy.
* **eHealth** (Wang et al. 2021): the claim is the CBLUE average; CHIP-STS (macro-F1) is
  one of its tasks. CBLUE's test labels are hidden, so kgplm scores a split carved from the public
  data (``kgplm.evaluation.tasks``). CBLUE's NER (CMeEE) is replaced by cMedQANER (flat NER).
* **EP-PLM** (Liu et al. 2022): the claim is query–title relevance (QTRel-easy/-hard),
  query intent and query NER on a private medicinal-product search dataset kgplm does not have.
  CHIP-STS (medical sentence-pair matching, macro-F1) stands in for query–title relevance. The
  knowledge the paper's product attribute prediction (PAP) injects is measured directly by the
  method's own evaluation "PAP AUC" (held-out drug–indication pairs against popularity- and
  length-matched negatives, :mod:`kgplm.methods.epplm.evaluation`); the paper reports no such
  number, so this endpoint tests the mechanism the claim rests on, not a number of the paper.
"""

from __future__ import annotations

from kgplm.methods.registry import Endpoint

__all__ = ["SMEDBERT", "KEBIOLM", "EMBERT", "EHEALTH", "EPPLM"]

SMEDBERT = (
    Endpoint("cmedqaner", "entity_f1", claim="NER gain over BERT-style baselines on cMedQANER"),
    Endpoint("cmedqq", "accuracy", claim="question-matching gain on cMedQQ"),
)
KEBIOLM = (
    Endpoint("cmedqaner", "entity_f1", claim="NER gain over PubMedBERT on BLURB NER",
             approximation="Chinese cMedQANER instead of English BLURB NER"),
    Endpoint("cehrner", "entity_f1", claim="NER gain over PubMedBERT on BLURB NER",
             approximation="Chinese cEHRNER instead of English BLURB NER"),
)
EMBERT = (
    Endpoint("cmedqaner", "entity_f1", claim="gain on cMedQANER F1"),
    Endpoint("cmedqq", "accuracy", claim="gain on cMedQQ",
             approximation="the paper reports F1 on cMedQQ; kgplm scores it by accuracy"),
)
EHEALTH = (
    Endpoint("chip-sts", "macro_f1", claim="gain on CBLUE, CHIP-STS among its tasks",
             approximation="CBLUE's hidden test set replaced by a split of the public data"),
    Endpoint("cmedqaner", "entity_f1", claim="gain on CBLUE NER, CMeEE",
             approximation="flat NER on cMedQANER instead of nested NER on CMeEE"),
)
EPPLM = (
    Endpoint("chip-sts", "macro_f1", claim="gain on query–title relevance, QTRel-easy/-hard",
             approximation="CHIP-STS sentence-pair matching stands in for the private query–title relevance "
                           "data"),
    Endpoint("PAP AUC", "auc", claim="PAP injects drug–attribute knowledge",
             approximation="the method's own held-out PAP AUC (not a number the paper reports)"),
)
