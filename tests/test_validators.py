"""The generated schema validators must match the schemas in hub/state/contract.py."""

import copy

import fastjsonschema
import pytest

from hub.core.errors import ContractInvalid
from hub.state import _validate_contract, _validate_judge, contract


def test_generated_validators_are_current_so_run_time_compiling_is_never_needed():
    # If this fails, run: .venv/bin/python scripts/gen_validators.py
    assert contract.schema_hash() == _validate_contract.SCHEMA_HASH
    assert contract.schema_hash() == _validate_judge.SCHEMA_HASH


def sample():
    return contract.new_contract(
        project="p",
        title="t",
        requirements=["r"],
        now=contract.now_utc(),
        roles={"implementer": "m"},
        target_file="a.py",
    )


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda c: c.update(status="sleeping"), "$.status"),
        (lambda c: c["limits"].update(max_rebuttals="two"), "$.limits.max_rebuttals"),
        (lambda c: c.pop("task_id"), "$.task_id"),
        (lambda c: c["specification"].update(requirements=[]), "$.specification.requirements"),
    ],
)
def test_generated_and_compiled_validators_reject_the_same_field(mutate, path):
    bad = copy.deepcopy(sample())
    mutate(bad)
    with pytest.raises(ContractInvalid) as caught:
        contract.validate(bad, "TASK_CONTRACT.json")
    assert caught.value.json_path == path
    with pytest.raises(fastjsonschema.JsonSchemaValueException):
        fastjsonschema.compile(contract.SCHEMA)(bad)
