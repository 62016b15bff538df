"""The generated schema validators must match the schemas in hub/state/schema.py (the contract's derived
from the TypedDicts of hub/state/contract.py)."""

import copy

import fastjsonschema
import pytest

from hub.core.errors import ContractInvalid
from hub.state import _validate_contract, _validate_judge, schema
from hub.state.contract import now_utc
from hub.state.new_task import new_contract


def test_generated_validators_are_current_so_run_time_compiling_is_never_needed():
    # If this fails, run: .venv/bin/python scripts/gen_validators.py
    assert schema.schema_json(schema.SCHEMA) == _validate_contract.SCHEMA_JSON
    assert schema.sources_stamp() == _validate_contract.SOURCES_STAMP
    assert schema.schema_json(schema.JUDGE_REPORT_SCHEMA) == _validate_judge.SCHEMA_JSON
    assert schema.validator("contract") is _validate_contract.validate


def sample():
    return new_contract(
        project="p",
        title="t",
        requirements=["r"],
        now=now_utc(),
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
        schema.validate(bad, "TASK_CONTRACT.json")
    assert caught.value.json_path == path
    with pytest.raises(fastjsonschema.JsonSchemaValueException):
        fastjsonschema.compile(schema.SCHEMA)(bad)
