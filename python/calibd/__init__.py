"""calibd -- feed calibd (predictions and their outcomes) and follow the
recalibration parameters it publishes, from Python.

    from calibd import Producer, Follower

    with Producer("tcp://127.0.0.1:7454") as p:      # calibd's ingest_pull
        p.predict("churn", ids, probs=clf.predict_proba(X))
        p.label("churn", ids_known, y_known)          # later, by id

    f = Follower("tcp://127.0.0.1:7451", ["churn"])  # calibd's publish
    f.start()                                        # a background thread
    version, probs = f.apply("churn", "probs", clf.predict_proba(X))

The wire contract is calibd-protocol(7); the C twin is libcalib_client
(calib_client(3)).
"""

from ._errors import CalibdError
from .follower import (BINARY, GAUSSIAN, LOGITS, PROBS, Follower, NotApplicable, NotParams,
                       Params, Reject, apply_params, apply_rows, decode_params)
from .producer import MAX_BATCH, Producer, Rejected

# the one place the version is written: pyproject.toml reads it from here
__version__ = "0.2.0"

__all__ = ["Producer", "Rejected", "Follower", "Params", "Reject", "NotParams", "NotApplicable",
           "CalibdError", "decode_params", "apply_params", "apply_rows", "MAX_BATCH",
           "LOGITS", "PROBS", "BINARY", "GAUSSIAN", "__version__"]
