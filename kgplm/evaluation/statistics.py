"""Statistics for comparing models: seed-level tests, Holm's adjustment, seed intervals, and the
test-sampling interval of a paired bootstrap over test examples.

Seed-level tests (:func:`paired_t_test`, :func:`sign_flip_test`)
    The unit of inference is the **pre-training seed**. For each seed s the method and its
    comparator (its control, or for an ablation the method itself) are trained with the same seed,
    data order and masks; d_s = score(method, s) − score(comparator, s), each score already averaged
    over that seed's fine-tuning seeds. Both tests ask whether the mean of d differs from 0, and
    both count *training* variance: a gain that one lucky seed produces does not pass.

    * Paired t-test (Student 1908; ``scipy.stats.ttest_rel``): t = d̄ / (s_d / √n) with n − 1
      degrees of freedom, two-sided p. Assumes the d_s are roughly normal; with n = 3–5 that
      assumption is what the p leans on.
    * Exact sign-flip permutation test (Fisher 1935; the paired randomisation test): under the
      null that method and comparator are exchangeable within a seed, every sign pattern of the
      d_s is equally likely; p = #{σ ∈ {±1}^n : |Σ σ_s d_s| ≥ |Σ d_s|} / 2^n, enumerating all
      2^n patterns (no Monte Carlo). It assumes no distribution, but it is coarse: with n seeds
      the smallest two-sided p is 2 / 2^n (n = 5: 0.0625, n = 3: 0.25), so fewer than 6 seeds can
      never reach p < 0.05 with it.

Minimal detectable effect (:func:`minimal_detectable_effect`)
    The smallest true mean difference δ that the two-sided paired t-test at level α detects with
    probability ``power`` (80 % by default), given n seeds and the standard deviation s of the
    per-seed differences: the δ solving P(|T| > t_{1−α/2, n−1}) = power, where T follows the
    non-central t distribution with n − 1 degrees of freedom and non-centrality δ√n / s (Cohen
    1988, *Statistical Power Analysis*, ch. 2; the computation of G*Power's and statsmodels'
    ``TTestPower``). With the observed s in place of the true one it is an estimate: it says how
    large a gain this design could have seen, not that a smaller one is absent.

Holm's step-down adjustment (:func:`holm`)
    Holm (1979), *A simple sequentially rejective multiple test procedure*: sort the m p-values,
    p_(1) ≤ … ≤ p_(m); adjusted p_(i) = min(1, max_{j ≤ i} (m − j + 1) · p_(j)). Rejecting where
    the adjusted p < α controls the family-wise error rate at α for any dependence between the tests.

Per-example counts
    Every metric the replication table reports is a function of counts summed over test examples,
    so one array of per-example counts, shape (examples, k), carries everything a resampling needs:

    * ``entity_f1`` (micro, exact spans): (true positives, predicted, gold) per document;
      F1 = 2·TP / (P + G), 0 when P + G = 0 — equal to
      :func:`kgplm.evaluation.metrics.entity_scores`' F1.
    * ``accuracy`` (also Acc@1 of a similarity query or a probe hit): (correct, 1) per example;
      a prediction of ``None`` (no prediction) is a miss.
    * ``macro_f1``: (TP_l, P_l, G_l) for every label l of a fixed label list, flattened to 3·L;
      the mean of 2·TP_l / (P_l + G_l) over the labels present in gold ∪ predictions
      (P_l + G_l > 0), the convention of sklearn and the CBLUE/CHIP scripts.

Seed interval (:func:`seed_interval`)
    mean ± t_{(1+c)/2, n−1} · s / √n over n independent runs (Student's t interval; s the sample
    standard deviation). In a nested design (fine-tuning seeds inside pre-training seeds) the
    independent unit is the pre-training seed: average the fine-tuning seeds of each pre-training
    seed first, then take the interval over pre-training seeds (n = their number).

Paired bootstrap (:func:`paired_bootstrap`) — a *test-sampling interval*, not a test of the claim
    Efron & Tibshirani (1993), *An Introduction to the Bootstrap*, §16; its use for comparing NLP
    systems: Koehn (2004), Berg-Kirkpatrick et al. (2012). The observed statistic δ is the
    method's score minus the control's, averaged over matched runs (run r of the method — a
    pre-training seed and fine-tuning seed — is paired with run r of the control: same seeds).
    The **resampling unit is the test example** (a document for NER, a pair for pair tasks, a
    query or a probe): each replicate draws n example indices with replacement and applies the
    *same* draw to every run of both models, so the pairing by example and by seed is kept. The
    seeds themselves are not resampled: the test asks whether the difference would survive
    another draw of the test set with these runs; seed-to-seed variation is what the interval
    column shows. Its percentile interval of δ is what the replication table prints, labelled a
    "test-sampling interval": how much δ would move with another test set *for these runs*. Its
    p-value ignores training variance (a single lucky seed can give p ≈ 0.001 where the seed-level
    t-test gives 0.5), so the table no longer reports it as evidence. Two-sided p-value with the bootstrap distribution shifted to the null,
    p = (1 + #{b : |δ*_b − δ| ≥ |δ|}) / (B + 1) (Berg-Kirkpatrick et al.'s one-sided
    δ*_b − δ ≥ δ, made two-sided; the +1 keeps a Monte Carlo p-value away from 0). A
    tolerance of 1e-12 absorbs floating-point noise in the comparison.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from kgplm.exceptions import ConfigurationError

__all__ = [
    "COUNT_METRICS",
    "example_counts",
    "metric_from_counts",
    "Interval",
    "seed_interval",
    "BootstrapResult",
    "paired_bootstrap",
    "SeedTest",
    "paired_t_test",
    "sign_flip_test",
    "holm",
    "minimal_detectable_effect",
    "MAX_EXACT_FLIPS",
]

COUNT_METRICS = ("entity_f1", "accuracy", "macro_f1")
_TOLERANCE = 1e-12
#: the largest number of seeds whose 2^n sign patterns :func:`sign_flip_test` enumerates
MAX_EXACT_FLIPS = 20


# -- per-example counts ---------------------------------------------------------------------------------
def example_counts(metric: str, gold: Sequence, predicted: Sequence, labels: Sequence | None = None) -> np.ndarray:
    """(examples, k) counts of ``metric`` (module docstring); ``labels`` fixes macro-F1's label list."""
    if len(gold) != len(predicted):
        raise ConfigurationError(f"{len(gold)} gold examples but {len(predicted)} predicted")
    if metric == "entity_f1":
        rows = []
        for gold_spans, predicted_spans in zip(gold, predicted):
            gold_set, predicted_set = set(map(tuple, gold_spans)), set(map(tuple, predicted_spans))
            rows.append((len(gold_set & predicted_set), len(predicted_set), len(gold_set)))
        return np.asarray(rows, dtype=np.float64).reshape(len(rows), 3)
    if metric == "accuracy":
        correct = [predicted_label is not None and g == predicted_label for g, predicted_label in zip(gold, predicted)]
        return np.stack([np.asarray(correct, np.float64), np.ones(len(correct))], 1)
    if metric == "macro_f1":
        names = sorted(set(gold) | {p for p in predicted if p is not None}) if labels is None else list(labels)
        index = {label: position for position, label in enumerate(names)}
        unknown = (set(gold) | {p for p in predicted if p is not None}) - set(index)
        if unknown:
            raise ConfigurationError(f"labels {sorted(map(str, unknown))} are not in the label list {names}")
        counts = np.zeros((len(gold), len(names), 3))  # (examples, labels, [TP, P, G])
        for row, (g, p) in enumerate(zip(gold, predicted)):
            counts[row, index[g], 2] = 1
            if p is not None:
                counts[row, index[p], 1] = 1
                counts[row, index[p], 0] = float(p == g)
        return counts.reshape(len(gold), 3 * len(names))
    raise ConfigurationError(f"metric must be one of {COUNT_METRICS}, got {metric!r}")


def metric_from_counts(metric: str, totals: np.ndarray) -> np.ndarray:
    """The metric of counts summed over examples: ``totals`` (..., k) → (...)."""
    totals = np.asarray(totals, dtype=np.float64)
    if metric == "entity_f1":
        denominator = totals[..., 1] + totals[..., 2]
        return np.divide(2 * totals[..., 0], denominator, out=np.zeros_like(denominator), where=denominator > 0)
    if metric == "accuracy":
        return np.divide(totals[..., 0], totals[..., 1], out=np.zeros_like(totals[..., 0]), where=totals[..., 1] > 0)
    if metric == "macro_f1":
        per_label = totals.reshape(*totals.shape[:-1], -1, 3)  # (..., labels, [TP, P, G])
        denominator = per_label[..., 1] + per_label[..., 2]
        present = denominator > 0
        f1 = np.divide(2 * per_label[..., 0], denominator, out=np.zeros_like(denominator), where=present)
        count = present.sum(-1)
        return np.divide(f1.sum(-1), count, out=np.zeros(count.shape), where=count > 0)
    raise ConfigurationError(f"metric must be one of {COUNT_METRICS}, got {metric!r}")


# -- intervals over seeds ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Interval:
    """``mean ± half_width`` at ``confidence`` over ``n`` runs (``half_width`` is NaN for one run)."""

    mean: float
    half_width: float
    n: int
    confidence: float = 0.95

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width


def seed_interval(values: Iterable[float], confidence: float = 0.95) -> Interval:
    """Student's t interval of the mean of independent runs (module docstring)."""
    from scipy.stats import t

    values = np.asarray(list(values), dtype=np.float64)
    if not len(values):
        raise ConfigurationError("an interval needs at least one value")
    if not 0 < confidence < 1:
        raise ConfigurationError(f"confidence must be in (0, 1), got {confidence}")
    mean = float(values.mean())
    if len(values) == 1:
        return Interval(mean, math.nan, 1, confidence)
    half_width = float(t.ppf((1 + confidence) / 2, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values)))
    return Interval(mean, half_width, len(values), confidence)


# -- paired bootstrap -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class BootstrapResult:
    """δ (method − control), the two-sided p-value, the percentile interval of δ* and B."""

    difference: float
    p_value: float
    low: float
    high: float
    resamples: int


def _as_runs(counts) -> np.ndarray:
    array = np.asarray(counts, dtype=np.float64)
    if array.ndim == 2:
        array = array[None]
    if array.ndim != 3:
        raise ConfigurationError(f"counts must be (examples, k) or (runs, examples, k), got shape {array.shape}")
    return array


def paired_bootstrap(
    method_counts,
    control_counts,
    metric: str,
    *,
    resamples: int = 10_000,
    seed: int = 0,
    indices: np.ndarray | None = None,
    confidence: float = 0.95,
    chunk: int = 256,
) -> BootstrapResult:
    """Paired bootstrap of the method's score minus the control's over test examples (module docstring).

    ``method_counts`` and ``control_counts``: (runs, examples, k) per-example counts (or (examples, k)
    for one run), runs matched by position. ``indices`` (B, examples) gives the resamples
    explicitly (e.g. every possible draw, for an exact bootstrap); otherwise ``resamples`` seeded draws.
    """
    method, control = _as_runs(method_counts), _as_runs(control_counts)
    if method.shape != control.shape:
        raise ConfigurationError(
            f"the method's counts {method.shape} and the control's {control.shape} must match: "
            f"the same runs (seeds) and the same test examples"
        )
    num_examples = method.shape[1]
    if not num_examples:
        raise ConfigurationError("no test examples to resample")
    observed = float(np.mean(metric_from_counts(metric, method.sum(1)) - metric_from_counts(metric, control.sum(1))))
    if indices is None:
        if resamples < 1:
            raise ConfigurationError(f"resamples must be positive, got {resamples}")
        rng = np.random.default_rng(seed)
        draws = (
            rng.integers(0, num_examples, (min(chunk, resamples - start), num_examples))
            for start in range(0, resamples, chunk)
        )
    else:
        indices = np.asarray(indices)
        if indices.ndim != 2 or indices.shape[1] != num_examples:
            raise ConfigurationError(f"indices must be (resamples, {num_examples}), got {indices.shape}")
        draws = (indices[start : start + chunk] for start in range(0, len(indices), chunk))
    differences = []
    for draw in draws:
        weights = np.stack([np.bincount(row, minlength=num_examples) for row in draw]).astype(np.float64)  # (B, n)
        method_totals = np.einsum("bn,rnk->brk", weights, method)  # (B, runs, k)
        control_totals = np.einsum("bn,rnk->brk", weights, control)
        differences.append(
            (metric_from_counts(metric, method_totals) - metric_from_counts(metric, control_totals)).mean(1)
        )  # (B,)
    differences = np.concatenate(differences)
    extreme = np.count_nonzero(np.abs(differences - observed) >= abs(observed) - _TOLERANCE)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(differences, [alpha, 1 - alpha])
    return BootstrapResult(observed, (1 + extreme) / (len(differences) + 1), float(low), float(high), len(differences))


# -- seed-level tests ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SeedTest:
    """A seed-level test of the per-seed differences d (module docstring): their mean, n, the p-value."""

    difference: float
    n: int
    p_value: float
    statistic: float = math.nan  # t for the t-test; Σ d for the permutation test


def _differences(method: Sequence[float], comparator: Sequence[float]) -> np.ndarray:
    method, comparator = np.asarray(method, dtype=np.float64), np.asarray(comparator, dtype=np.float64)
    if method.ndim != 1 or method.shape != comparator.shape:
        raise ConfigurationError(
            f"seed-level tests need one score per seed for both models, paired by seed; got "
            f"shapes {method.shape} and {comparator.shape}"
        )
    if len(method) < 2:
        raise ConfigurationError(f"a seed-level test needs at least 2 seeds, got {len(method)}")
    if not np.isfinite(method).all() or not np.isfinite(comparator).all():
        raise ConfigurationError(f"seed scores must be finite, got {method.tolist()} and {comparator.tolist()}")
    return method - comparator


def paired_t_test(method: Sequence[float], comparator: Sequence[float]) -> SeedTest:
    """Two-sided paired t-test of per-seed scores (equal to ``scipy.stats.ttest_rel``). When every
    difference is equal the t statistic is undefined: p = 1 if they are all 0, else 0 (a constant
    non-zero gain has no variance to weigh it against; :func:`sign_flip_test` still bounds it)."""
    from scipy.stats import t as student_t

    differences = _differences(method, comparator)
    n, mean = len(differences), float(differences.mean())
    deviation = float(differences.std(ddof=1))
    if deviation <= _TOLERANCE * max(1.0, abs(mean)):
        return SeedTest(
            mean,
            n,
            1.0 if abs(mean) <= _TOLERANCE else 0.0,
            math.copysign(math.inf, mean) if abs(mean) > _TOLERANCE else math.nan,
        )
    statistic = mean / (deviation / math.sqrt(n))
    return SeedTest(mean, n, float(2 * student_t.sf(abs(statistic), n - 1)), statistic)


def sign_flip_test(method: Sequence[float], comparator: Sequence[float]) -> SeedTest:
    """Exact two-sided sign-flip permutation test over all 2^n sign patterns (module docstring)."""
    differences = _differences(method, comparator)
    n = len(differences)
    if n > MAX_EXACT_FLIPS:
        raise ConfigurationError(
            f"the exact sign-flip test enumerates 2^n patterns; n = {n} seeds exceeds {MAX_EXACT_FLIPS}"
        )
    patterns = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1) * -2 + 1  # (2^n, n) of ±1, identity first
    sums = patterns @ differences
    observed = float(differences.sum())
    extreme = int(np.count_nonzero(np.abs(sums) >= abs(observed) - _TOLERANCE * max(1.0, abs(observed))))
    return SeedTest(float(differences.mean()), n, extreme / 2**n, observed)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order (module docstring)."""
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1 or ((p < 0) | (p > 1) | ~np.isfinite(p)).any():
        raise ConfigurationError(f"Holm's adjustment needs p-values in [0, 1], got {list(p_values)}")
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted_sorted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    adjusted = np.empty(m)
    adjusted[order] = adjusted_sorted
    return adjusted.tolist()


def minimal_detectable_effect(sd: float, n: int, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest mean per-seed difference the two-sided paired t-test at level ``alpha`` detects with
    probability ``power``, for ``n`` seeds whose differences have standard deviation ``sd`` (module
    docstring). ``sd`` 0 gives 0 (every non-zero constant difference is detected)."""
    from scipy.optimize import brentq
    from scipy.stats import nct
    from scipy.stats import t as student_t

    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        raise ConfigurationError(f"minimal_detectable_effect: n must be an integer number of seeds ≥ 2, got {n!r}")
    if not (math.isfinite(sd) and sd >= 0):
        raise ConfigurationError(f"minimal_detectable_effect: sd must be a finite number ≥ 0, got {sd!r}")
    if not (0 < alpha < 1 and alpha < power < 1):
        raise ConfigurationError(
            f"minimal_detectable_effect: need 0 < alpha < power < 1, got alpha {alpha!r}, power {power!r}"
        )
    if sd == 0:
        return 0.0
    freedom = n - 1
    critical = float(student_t.ppf(1 - alpha / 2, freedom))

    def shortfall(standardised: float) -> float:
        noncentrality = standardised * math.sqrt(n)
        detected = nct.sf(critical, freedom, noncentrality) + nct.cdf(-critical, freedom, noncentrality)
        return float(detected) - power

    upper = 1.0
    while shortfall(upper) < 0:
        upper *= 2
    return float(brentq(shortfall, 0.0, upper, xtol=1e-12)) * sd
