"""DomainVQA-R smoke benchmark (CI size): generator throughput per domain and the vectorised
bootstrap. The full benchmark is `kira eval domainvqa --out DIR` (see docs/domainvqa.md);
CI runs this file with --benchmark-disable as a correctness pass."""

from __future__ import annotations

import numpy as np
import pytest

from kira.eval import DOMAINS, build_domainvqa
from kira.eval.metrics import bootstrap_ci


@pytest.mark.parametrize("domain", DOMAINS)
def test_bench_build_small(benchmark, domain):
    result = benchmark.pedantic(build_domainvqa, kwargs={"seed": 0, "small": True, "domains": [domain]},
                                rounds=1, iterations=1)
    ds = result[domain]
    assert len(ds.documents) == 24 and len(ds.questions) == 12
    assert all(set(q.relevant_doc_ids) <= {d.doc_id for d in ds.documents} for q in ds.questions)


def test_bench_bootstrap(benchmark):
    values = np.random.default_rng(0).random(400)
    est = benchmark(bootstrap_ci, values, resamples=2000, seed=0)
    assert est.low < est.mean < est.high
