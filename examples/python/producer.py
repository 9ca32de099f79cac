#!/usr/bin/python3
"""producer.py -- a classifier's predictions, and later their outcomes, fed
to calibd with the calibd package (python/; `pip install ./python`).

    producer.py [ENDPOINT] [MODEL]

ENDPOINT is calibd's ingest_pull endpoint (default tcp://127.0.0.1:7454;
calibd.conf: ingest_pull = @tcp://127.0.0.1:7454), MODEL the model's name
(default churn). The classifier is a stand-in with scikit-learn's
predict_proba; with scikit-learn, any fitted classifier takes its place.
"""
import sys

import numpy as np

from calibd import Producer


class Overconfident:
    """A logistic model twice as sure of itself as it should be."""

    def __init__(self, w):
        self.w = w

    def predict_proba(self, X):
        p = 1 / (1 + np.exp(-2 * X @ self.w))
        return np.stack([1 - p, p], axis=1)


rng = np.random.default_rng(1)
w = np.array([1.0, -0.5, 0.25])
X = rng.normal(size=(5000, 3))
y = (rng.uniform(size=5000) < 1 / (1 + np.exp(-X @ w))).astype(int)  # the truth
clf = Overconfident(w)
endpoint = sys.argv[1] if len(sys.argv) > 1 else "tcp://127.0.0.1:7454"
model = sys.argv[2] if len(sys.argv) > 2 else "churn"

# the producer: these lines are all a service needs
with Producer(endpoint) as p:
    ids = np.arange(len(X))                            # the join key of each prediction
    p.predict(model, ids, probs=clf.predict_proba(X))  # at prediction time
    p.label(model, ids, y)                             # when the outcomes are known
print("sent %d predictions and %d labels to %s" % (len(X), len(y), endpoint))
