"""The conformance kit: one call per kind of extension, checking that it keeps the contract EdgeSync's runtimes
rely on (docs/extending.md, "Check your extension: the conformance kit"). A broken rule raises
`ContractViolation`, an AssertionError whose message starts with the rule's name (rules.py), then says what
differed. The calls are made for pytest but need none:

    from edgesync.testing import check_algorithm

    def test_fedfoo_keeps_the_contract():
        check_algorithm("mylab.algos:FEDFOO", config={"lr": 0.1})

Each kind's rules are in its module's docstring: algorithm.py, model.py, dataset.py, profile.py; the task they
run on in tiny_task.py.
"""
from edgesync.testing.algorithm import check_algorithm
from edgesync.testing.dataset import check_dataset
from edgesync.testing.model import check_model
from edgesync.testing.profile import check_profile
from edgesync.testing.rules import ContractViolation

__all__ = ["ContractViolation", "check_algorithm", "check_dataset", "check_model", "check_profile"]
