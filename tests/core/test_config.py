"""hub.yaml + environment -> Config."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from hub.core.config import ConfigError, default_yaml, load_config, normalize_ollama_host


def write(repo: Path, text: str, age_seconds: float = 10.0) -> Path:
    (repo / ".git").mkdir(exist_ok=True)
    path = repo / "hub.yaml"
    path.write_text(text, encoding="utf-8")
    then = time.time() - age_seconds
    os.utime(path, (then, then))
    return path


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("", "http://127.0.0.1:11434"),
        ("localhost", "http://localhost:11434"),
        ("0.0.0.0:11434", "http://127.0.0.1:11434"),
        ("gpu-box:9999", "http://gpu-box:9999"),
        ("https://ollama.example:443/", "https://ollama.example:443"),
        ("http://[::1]", "http://[::1]:11434"),
    ],
)
def test_ollama_host_is_read_the_way_ollama_reads_it(given: str, expected: str) -> None:
    assert normalize_ollama_host(given) == expected


def test_the_default_hub_yaml_loads_with_every_role_on_the_hub_worker(tmp_path: Path) -> None:
    write(tmp_path, default_yaml("demo"))
    config = load_config(tmp_path, env={})
    assert config.project == "demo"
    assert {r.backend for r in config.roles.values()} == {"mcp"}
    assert config.worker_server("hub").transport == "inprocess"
    assert config.num_ctx_for(config.role("implementer").model) == 16384
    assert config.server_wait_minutes == 30
    assert (config.role("implementer").num_predict, config.role("local_reviewer").num_predict) == (6144, 2048)
    assert config.handoff_dir == tmp_path / "_handoff"


def test_hub_init_writes_the_num_ctx_the_readme_shows() -> None:
    from hub.core.config import DEFAULT_NUM_CTX

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert f"{{num_ctx: {DEFAULT_NUM_CTX}}}" in readme
    assert f"num_ctx: {DEFAULT_NUM_CTX}" in default_yaml("p")


def test_a_typical_source_file_and_its_whole_file_answer_fit_the_default_window() -> None:
    from hub.core.config import DEFAULT_NUM_CTX, DEFAULT_NUM_PREDICT
    from hub.workers import budget

    # The implementer's own code (once implement.py alone, now split from its workbench) as the source.
    phases = Path(__file__).resolve().parents[2] / "hub" / "phases"
    source = "".join((phases / name).read_text(encoding="utf-8") for name in ("implement.py", "workbench.py"))
    # A typical file, a few hundred lines: a fixed share of one, so the file's growth cannot fail this.
    source = source[: source.index("\n", 16_000) + 1]
    fit = budget.plan(
        "instructions " * 200 + source, "system " * 50, DEFAULT_NUM_CTX, DEFAULT_NUM_PREDICT["implementer"]
    )
    assert fit.fits
    assert budget.estimate_tokens(source) < DEFAULT_NUM_PREDICT["implementer"]  # the answer fits too


def test_bad_limits_and_num_predict_are_config_errors(tmp_path: Path) -> None:
    (tmp_path / "hub.yaml").write_text("limits: {server_wait_minutes: soon}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"limits\.server_wait_minutes"):
        load_config(tmp_path, env={})
    (tmp_path / "hub.yaml").write_text("roles: {implementer: {num_predict: 0}}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"roles\.implementer\.num_predict"):
        load_config(tmp_path, env={})


def test_the_environment_overrides_the_file(tmp_path: Path) -> None:
    write(tmp_path, "project: p\nroles:\n  implementer: {model: a, backend: mcp}\n")
    config = load_config(
        tmp_path,
        env={
            "OLLAMA_HOST": "box:1234",
            "HUB_IMPLEMENTER_MODEL": "b",
            "HUB_IMPLEMENTER_BACKEND": "ollama",
            "HUB_HANDOFF_DIR": "elsewhere",
            "HUB_JUDGE_COMMAND": "judge.sh",
        },
    )
    assert config.ollama_host == "http://box:1234"
    assert (config.role("implementer").model, config.role("implementer").backend) == ("b", "ollama")
    assert config.handoff_dir == tmp_path / "elsewhere"
    assert config.judge.command == "judge.sh"


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("roles:\n  implementer: {backend: carrier-pigeon}\n", "roles.implementer.backend"),
        ("roles:\n  implementer: {timeouts: {stall: soon}}\n", "roles.implementer.timeouts"),
        ("models:\n  m: {num_ctx: 12}\n", "models.m.num_ctx"),
        ("workers:\n  - {name: w, transport: pigeon}\n", "workers[0].transport"),
        ("workers:\n  - {name: w, transport: stdio}\n", "workers[0].command"),
        ("workers:\n  - {name: w, transport: http}\n", "workers[0].url"),
        ("workers:\n  - {name: w, transport: inprocess, command: [x]}\n", "workers[0].command"),
        ("judge: {backend: oracle}\n", "judge.backend"),
        ("limits: {parallel_tasks: 0}\n", "limits.parallel_tasks"),
        ("ollama: {slots: many}\n", "ollama.slots"),
        ("ollama: {hosts: [{slots: 2}]}\n", "ollama.hosts[0]"),
        ("ollama: {hosts: [{host: a, slots: 0}]}\n", "ollama.hosts[0].slots"),
        ("keep_branches: sometimes\n", "keep_branches"),
        ("worktrees_dir: 7\n", "worktrees_dir"),
        ("- a list\n", "top level"),
        ("roles: [\n", "not valid YAML"),
    ],
)
def test_a_bad_value_is_refused_naming_the_file_and_the_key(tmp_path: Path, text: str, names: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path, env={})
    assert str(path) in str(caught.value) and names in str(caught.value)


def test_an_edited_hub_yaml_is_read_again_not_served_from_the_cache(tmp_path: Path) -> None:
    path = write(tmp_path, "project: first\n")
    assert load_config(tmp_path, env={}).project == "first"
    assert (tmp_path / ".git" / "hub-yaml-cache.json").exists()

    path.write_text("project: other\n", encoding="utf-8")
    os.utime(path, (time.time() - 5, time.time() - 5))
    assert load_config(tmp_path, env={}).project == "other"


def test_the_cache_is_what_a_second_load_reads(tmp_path: Path) -> None:
    write(tmp_path, "project: first\n")
    load_config(tmp_path, env={})
    cache = tmp_path / ".git" / "hub-yaml-cache.json"
    data = json.loads(cache.read_text(encoding="utf-8"))
    data["raw"]["project"] = "from-cache"
    cache.write_text(json.dumps(data), encoding="utf-8")
    assert load_config(tmp_path, env={}).project == "from-cache"


def test_a_file_changed_moments_ago_is_not_cached(tmp_path: Path) -> None:
    write(tmp_path, "project: fresh\n", age_seconds=0)
    assert load_config(tmp_path, env={}).project == "fresh"
    assert not (tmp_path / ".git" / "hub-yaml-cache.json").exists()


def test_a_corrupt_cache_is_ignored(tmp_path: Path) -> None:
    write(tmp_path, "project: real\n")
    (tmp_path / ".git" / "hub-yaml-cache.json").write_text("{not json", encoding="utf-8")
    assert load_config(tmp_path, env={}).project == "real"


def test_the_task_settings_parallel_tasks_slots_hosts_worktrees_and_branches(tmp_path: Path) -> None:
    write(
        tmp_path,
        "limits: {parallel_tasks: 4}\n"
        "ollama: {host: gpu0, slots: 2, hosts: [gpu1, {host: 'http://gpu2:9999', slots: 3}]}\n"
        "worktrees_dir: ../trees\nkeep_branches: true\n",
    )
    config = load_config(tmp_path, env={})
    assert config.parallel_tasks == 4 and config.ollama_slots == 2
    assert config.model_servers() == (("http://gpu1:11434", 2), ("http://gpu2:9999", 3))
    assert config.worktrees_dir == tmp_path / "../trees" and config.keep_branches is True
    assert load_config(tmp_path, env={"HUB_PARALLEL_TASKS": "7"}).parallel_tasks == 7
    write(tmp_path, "project: p\n")
    plain = load_config(tmp_path, env={})
    assert (plain.parallel_tasks, plain.worktrees_dir, plain.keep_branches) == (2, None, False)
    assert plain.model_servers() == ((plain.ollama_host, 1),)


def test_the_schema_forms_other_keys_will_need_check_what_they_should() -> None:
    from hub.core.config_schema import AnyOf, Bool, Int, ListOf, Map, Str

    sandbox = AnyOf((Str(choices=("auto", "required", "off")), Bool(), Map({"network": Bool()})))
    assert sandbox.check("off", ("sandbox",)) == [] and sandbox.check(False, ("sandbox",)) == []
    assert sandbox.check({"network": True}, ("sandbox",)) == []
    [typo] = sandbox.check({"netwrok": True}, ("sandbox",))
    assert typo.path == ("sandbox", "netwrok") and "did you mean 'network'?" in typo.problem
    [word] = sandbox.check("of", ("sandbox",))
    assert "'of' is not allowed; did you mean 'off'?" in word.problem
    [wrong] = sandbox.check(3, ("sandbox",))
    assert wrong.expected.startswith("one of auto, required, off or true or false or a mapping")
    hosts = ListOf(AnyOf((Str(), Map({"host": Str(), "slots": Int(1)}, required=("host",)))))
    assert hosts.check(["http://a:11434", {"host": "http://b", "slots": 2}], ("ollama", "hosts")) == []
    [slots] = hosts.check([{"host": "h", "slots": 0}], ("ollama", "hosts"))
    assert slots.path == ("ollama", "hosts", 0, "slots") and "too small" in slots.problem


KEYS = [
    "project",
    "roles",
    "implementer",
    "judge",
    "model",
    "backend",
    "timeouts",
    "stall",
    "models",
    "num_ctx",
    "workers",
    "name",
    "transport",
    "command",
    "url",
    "env",
    "limits",
    "rule",
    "role",
    "x",
]


def test_any_hub_yaml_loads_or_is_refused_with_a_config_error_never_another_exception(tmp_path: Path) -> None:
    import yaml
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-10, 10**6),
        st.floats(allow_nan=True),
        st.text(max_size=8),
        st.sampled_from(["mcp", "ollama", "stdio", "http", "hub", "python"]),
    )
    values = st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)
        ),
        max_leaves=12,
    )
    documents = st.dictionaries(st.sampled_from(KEYS), values, max_size=5)
    (tmp_path / ".git").mkdir()

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(documents)
    def check(doc: dict[str, Any]) -> None:
        (tmp_path / "hub.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
        try:
            load_config(tmp_path, env={})
        except ConfigError as exc:
            assert str(exc).startswith(str(tmp_path / "hub.yaml"))

    check()


def readme_key_table() -> list[list[str]]:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Every key", 1)[1].split("\n## ", 1)[0]
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("| `")
    ]


def test_the_readme_key_reference_lists_every_schema_key_with_its_type() -> None:
    from hub.core.config_report import reference

    listed = [(key.strip("`"), form) for key, form, *_ in readme_key_table()]
    rows = "\n".join(f"| `{key}` | {form} | DEFAULT | MEANING |" for key, form in reference())
    assert listed == reference(), f"README's '### Every key' table should have these rows:\n{rows}"
    assert all(meaning for *_, meaning in readme_key_table())


def test_the_readme_key_references_defaults_are_the_ones_an_empty_hub_yaml_gets(tmp_path: Path) -> None:
    config = load_config(tmp_path, env={})
    role = config.role("implementer")
    actual = {
        "handoff_dir": config.handoff_dir.name,
        "halt_file": config.halt_file,
        "ollama.host": config.ollama_host,
        "openai.base_url": config.openai_base_url,
        "roles.<role>.model": role.model,
        "roles.<role>.backend": role.backend,
        "roles.<role>.worker": role.worker,
        "roles.<role>.timeouts.load": role.timeouts.load,
        "roles.<role>.timeouts.first_token": role.timeouts.first_token,
        "roles.<role>.timeouts.stall": role.timeouts.stall,
        "roles.<role>.timeouts.total": role.timeouts.total,
        "roles.<role>.temperature": role.temperature,
        "default_num_ctx": config.default_num_ctx,
        "acceptance_timeout_seconds": config.acceptance_timeout_seconds,
        "limits.max_changed_files": config.max_changed_files,
        "limits.global_timeout_hours": config.global_timeout_hours,
        "limits.server_wait_minutes": config.server_wait_minutes,
        "limits.max_reply_chars": config.max_reply_chars,
        "sandbox": config.sandbox.mode,
        "sandbox.network": str(config.sandbox.network).lower(),
    }
    documented = {key.strip("`"): default.strip("`") for key, _, default, _ in readme_key_table()}
    assert {key: documented[key] for key in actual} == {
        key: f"{value:g}" if isinstance(value, float) else str(value) for key, value in actual.items()
    }


def test_the_readme_key_reference_gives_each_keys_declared_default_and_meaning() -> None:
    from hub.core.config_schema import declaration
    from hub.core.config_template import scalar

    declared = 0
    for key, _, shown, meaning in readme_key_table():
        spec = declaration(key.strip("`"))
        if spec.default is None and not spec.help:
            continue
        declared += 1
        value = scalar(spec.default)
        assert shown.startswith(f"`{value}`" if isinstance(spec.default, str) else value), key
        assert meaning == spec.help, key
    assert declared >= 25


def test_hub_init_writes_the_declared_default_of_every_key_it_sets(tmp_path: Path) -> None:
    from hub.core.config_schema import declaration
    from hub.core.config_template import PLACEHOLDER, TEMPLATE

    empty = load_config(tmp_path, env={})
    write(tmp_path, default_yaml("demo"))
    written = load_config(tmp_path, env={})
    same = (
        "halt_file",
        "ollama_host",
        "default_num_ctx",
        "acceptance_timeout_seconds",
        "server_wait_minutes",
    )
    assert {f: getattr(written, f) for f in same} == {f: getattr(empty, f) for f in same}
    assert written.judge == empty.judge
    for role in ("implementer", "local_reviewer"):
        mine, left_out = written.role(role), empty.role(role)
        assert (mine.backend, mine.worker, mine.model) == (left_out.backend, left_out.worker, left_out.model)
        assert mine.timeouts._replace(total=left_out.timeouts.total) == left_out.timeouts
    assert written.role("implementer").timeouts == empty.role("implementer").timeouts
    # Every `{key}` the template names is a key of the table or one value render fills in itself.
    own = {"project", "model", "python", "timeouts.implementer", "timeouts.local_reviewer"}
    for key in PLACEHOLDER.findall(TEMPLATE):
        assert key in own or key.startswith("num_predict.") or declaration(key) is not None, key


def test_a_key_left_out_or_null_takes_its_declared_default_but_where_null_was_always_refused(
    tmp_path: Path,
) -> None:
    write(
        tmp_path, "limits:\n  server_wait_minutes: null\n  parallel_tasks: 3\nacceptance_timeout_seconds:\n"
    )
    config = load_config(tmp_path, env={})
    assert config.server_wait_minutes == 30.0 and config.acceptance_timeout_seconds == 300.0
    assert config.parallel_tasks == 3 and config.ollama_slots == 1 and config.keep_branches is False
    write(tmp_path, "ollama:\n  slots: null\n", age_seconds=20.0)
    with pytest.raises(ConfigError, match=r"ollama\.slots: expected an integer >= 1"):
        load_config(tmp_path, env={})


def test_a_hub_variable_a_typo_away_from_one_the_hub_reads_is_named_with_the_one_meant() -> None:
    from hub.core.config import mistyped_env

    env = {
        "HUB_IMPLEMENTOR_MODEL": "qwen2.5-coder:32b",
        "HUB_REVIEWER_MODEL": "llama3",
        "HUB_PARALLEL_TASK": "3",
        "HUB_IMPLEMENTER_MODEL": "right",  # read: not reported
        "HUB_VERBOSE": "1",  # GitHub's `hub`: not ours to judge
        "HUB_PROTOCOL": "https",
        "OLLAMA_HOST": "gpu",
    }
    assert mistyped_env(env) == [
        ("HUB_IMPLEMENTOR_MODEL", "HUB_IMPLEMENTER_MODEL"),
        ("HUB_PARALLEL_TASK", "HUB_PARALLEL_TASKS"),
        ("HUB_REVIEWER_MODEL", "HUB_LOCAL_REVIEWER_MODEL"),
    ]


def test_a_typo_of_the_servers_variables_is_named_with_the_one_meant() -> None:
    from hub.core.config import mistyped_env

    env = {
        "OLLAMA_HOTS": "gpu-box",
        "OLAMA_HOST": "gpu-box",
        "OPENAI_APIKEY": "sk-x",
        "OLLAMA_HOST": "gpu",  # read: not reported
        "OLLAMA_NUM_PARALLEL": "2",  # the server's own
        "OLLAMA_MODELS": "/srv/models",
        "OPENAI_BASE_URL": "http://x/v1",
    }
    assert mistyped_env(env) == [
        ("OLAMA_HOST", "OLLAMA_HOST"),
        ("OLLAMA_HOTS", "OLLAMA_HOST"),
        ("OPENAI_APIKEY", "OPENAI_API_KEY"),
    ]


@pytest.mark.parametrize("value", ["two", "0", "-1", "2.5"])
def test_hub_parallel_tasks_that_is_no_whole_number_is_an_error_naming_it(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match=f"HUB_PARALLEL_TASKS={value!r}.*whole number >= 1"):
        load_config(tmp_path, env={"HUB_PARALLEL_TASKS": value})


def test_every_hub_yaml_key_the_readme_names_is_one_hub_yaml_accepts() -> None:
    import re

    import yaml

    from hub.core.config_schema import validate

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    tops = "limits|roles|ollama|openai|judge|sandbox|models|rules|workers"
    named = set(re.findall(rf"`((?:{tops})(?:\.|\[\])[\w.<>\[\]]*)", readme))
    assert {"limits.timeout_minutes.judge", "limits.max_rebuttals", "roles.judge.model"} <= named
    unknown = {}
    for key in sorted(named):
        parts = key.replace("<role>", "implementer").replace("<model>", "m").replace("[]", ".[]").split(".")
        value: object = None
        for part in reversed(parts):
            value = [value] if part == "[]" else {part: value}
        problems = [p for p in validate(value) if p.at_key]
        if problems:
            unknown[key] = problems[0].problem
    assert unknown == {}
    # The README's hub.yaml examples, as a user would paste them.
    blocks = [b for _, b in re.findall(r"^(`{3,})yaml\n(.*?)^\1$", readme, re.S | re.M)]
    hub_yamls = [b for b in blocks if not b.startswith("# standin.yaml")]
    assert len(blocks) - len(hub_yamls) == 1 and len(hub_yamls) >= 2
    for block in hub_yamls:
        assert validate(yaml.safe_load(block)) == [], block
