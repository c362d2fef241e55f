"""Each client's accuracy under the final model (runtime/bookkeeping/client_eval.py) and its spread in the summary
(metrics/summary.py), on cases worked out by hand."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from edgesync.metrics.summary import client_spread
from edgesync.runtime.bookkeeping.client_eval import LABEL_WEIGHTED, OWN, ClientEvalSets, client_accuracies

# six evaluation samples, two per class 0, 1, 2; the model gets samples 0, 2, 3 and 5 right:
# per class 0: 1/2, 1: 2/2, 2: 1/2
LABELS = torch.tensor([0, 0, 1, 1, 2, 2])
CORRECT = np.array([True, False, True, True, False, True])


def test_label_weighted_accuracy_is_the_clients_label_shares_times_each_class_accuracy():
    shares = np.array([[1.0, 0.0, 0.0, 0.0],     # class 0 only: 0.5
                       [0.5, 0.5, 0.0, 0.0],     # 0.5·0.5 + 0.5·1.0 = 0.75
                       [0.2, 0.4, 0.4, 0.0],     # 0.2·0.5 + 0.4·1.0 + 0.4·0.5 = 0.7
                       [0.5, 0.0, 0.0, 0.5],     # class 3 is not in the evaluation set: 0.5 over the rest
                       [0.0, 0.0, 0.0, 1.0]])    # only class 3: nothing to measure it on
    sets = ClientEvalSets(LABEL_WEIGHTED, torch.zeros(6, 1), LABELS, shares=shares)
    assert client_accuracies(CORRECT, sets) == pytest.approx([0.5, 0.75, 0.7, 0.5, None])


def test_own_accuracy_is_the_share_right_of_each_clients_own_samples():
    sets = ClientEvalSets(OWN, torch.zeros(6, 1), LABELS, members=[np.array([0, 1]), np.array([2, 3, 4]),
                                                                     np.array([], dtype=np.int64)])
    assert client_accuracies(CORRECT, sets) == pytest.approx([0.5, 2 / 3, None])  # no test sample: None


def test_the_spread_leaves_out_clients_without_a_figure():
    # 0.5, 0.75 and 1.0: mean 0.75; 10th percentile by linear interpolation 0.5 + 0.2·(0.75 − 0.5) = 0.55
    spread = client_spread([0.75, None, 0.5, 1.0, float("nan")])
    assert spread == pytest.approx({"client_acc_mean": 0.75, "client_acc_p10": 0.55, "client_acc_worst": 0.5})
    assert client_spread([None]) == {"client_acc_mean": None, "client_acc_p10": None, "client_acc_worst": None}
