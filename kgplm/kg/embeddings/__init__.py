"""Knowledge-graph embeddings: TransE and TransR training, filtered evaluation, import and export.

SMedBERT uses TransR entity embeddings (200-d) and KeBioLM initialises its entity table from
TransE (100-d); kgplm trains them itself::

    from kgplm.kg.embeddings import KGEmbeddings, split_triples, train_kg_embeddings

    train, test = split_triples(store.triples, test_fraction=0.05)
    transe = train_kg_embeddings(store, method="transe", dim=100, triples=train)
    transr = train_kg_embeddings(store, method="transr", dim=100, triples=train, initialize_from=transe)
    transr.evaluate(test, filter_triples=store.triples)

The layout, one concept a module:

* :mod:`~kgplm.kg.embeddings.models` — the TransE and TransR energies and constraints (with the
  papers' equations and the choices made) and :class:`~kgplm.kg.embeddings.models.KGEmbeddings`,
  the tables of one store;
* :mod:`~kgplm.kg.embeddings.training` — :func:`~kgplm.kg.embeddings.training.train_kg_embeddings`:
  the margin loss, negative sampling, the memory it takes;
* :mod:`~kgplm.kg.embeddings.optimizers` — the row-wise optimisers a training step runs, and
  :mod:`~kgplm.kg.embeddings.kernels`, their compiled (numba) loops;
* :mod:`~kgplm.kg.embeddings.evaluation` — filtered, realistic link-prediction ranks
  (:func:`~kgplm.kg.embeddings.evaluation.rank_triples`) and their metrics;
* :mod:`~kgplm.kg.embeddings.files` — kgplm's safetensors + JSON format, OpenKE's and DGL-KE's
  files, and the labelled triples TSV PyKEEN reads
  (:func:`~kgplm.kg.embeddings.files.write_triples_tsv`);
* :mod:`~kgplm.kg.embeddings.triples` — id and labelled triples
  (:func:`~kgplm.kg.embeddings.triples.triples_to_ids`) and the seeded split
  (:func:`~kgplm.kg.embeddings.triples.split_triples`).
"""

from kgplm.kg.embeddings.evaluation import rank_triples
from kgplm.kg.embeddings.files import FORMAT_VERSION, write_triples_tsv
from kgplm.kg.embeddings.models import METHODS, KGEmbeddings, store_fingerprint, translation_energy
from kgplm.kg.embeddings.optimizers import OPTIMIZERS
from kgplm.kg.embeddings.training import train_kg_embeddings
from kgplm.kg.embeddings.triples import split_triples, triples_to_ids

__all__ = [
    "KGEmbeddings",
    "train_kg_embeddings",
    "split_triples",
    "write_triples_tsv",
    "rank_triples",
    "triples_to_ids",
    "translation_energy",
    "store_fingerprint",
    "METHODS",
    "OPTIMIZERS",
    "FORMAT_VERSION",
]
