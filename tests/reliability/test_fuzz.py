"""Bad input, property-based (hypothesis): malformed KEY=VALUE arguments, profiles, event streams, rule files,
data.yaml and label files fed to the public commands. Each case ends in a result (exit 0/1 with JSON on stdout) or
in one clear line on stderr with exit 2 (1 for what `check` exists to examine); never a
traceback, never "internal error", never a hang (each case runs under a 20 s alarm, see reliability_support.bounded).

The CLI runs in process (``yolodoctor.cli.main``) so that hundreds of cases take seconds; the last tests run a few
cases in real subprocesses to prove the exit codes themselves.

Already covered elsewhere: `check` on malformed data.yaml and label files, in process
(tests/commands/test_check_cli.py::test_malformed_inputs_never_traceback) and the dataset reader below the CLI
(tests/check/test_dataset.py); usage errors of `check` in subprocesses (tests/commands/test_cli.py).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from reliability_support import ROOT, cli, one_line_error, yd

pytestmark = pytest.mark.xdist_group("reliability")  # one worker: conftest.py says why

FIXTURE = ROOT / "fixtures" / "profiles" / "h200-defaults"
PROFILE = json.loads((FIXTURE / "profile.json").read_text())
EVENTS = [json.loads(line) for line in gzip.decompress((FIXTURE / "events.jsonl.gz").read_bytes()).splitlines()]
EXAMPLES = int(os.environ.get("YOLODOCTOR_FUZZ_EXAMPLES", "40"))  # more for a long local search
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES == 40, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
TRIED: dict[str, int] = {}  # cases run per test, for docs/reliability.md's figures (printed by the last test)


def count(name: str) -> None:
    TRIED[name] = TRIED.get(name, 0) + 1


def assert_contract(code: int, out: str, err: str, ok=(0, 1)) -> None:
    assert "Traceback" not in err and "internal error" not in err, err
    if code in ok:
        json.loads(out)  # a result: JSON on stdout, nothing else
    else:
        assert code == 2 and out == "" and one_line_error(err), (code, out[:300], err)


# ---------------------------------------------------------------------------------------------------------------------
# KEY=VALUE arguments (check, profile, fix --try)

KEYS = ["batch", "imgsz", "workers", "epochs", "device", "amp", "cache", "compile", "model", "data", "lr0", "fraction",
        "nbs", "deterministic", "seed", "close_mosaic", "mosaic", "val", "half", "rect", "time", "patience", "scale",
        "bach", "", "BATCH", "batch ", " batch", "-batch", "task", "mode"]
VALUES = st.one_of(
    st.text(max_size=24),
    st.integers(-10**12, 10**12).map(str),
    st.floats().map(repr),
    st.sampled_from(["", "None", "none", "true", "False", "[]", "[1, 2]", "{}", "(1,)", "1e999", "-1", "0", "nan",
                     "inf", "9" * 5000, "'x'", "[[[[1]]]]", "{'a': [1]}", "cpu", "cuda:99", "0,1", "-1,-1", "mps",
                     "ram", "disk", "reduce-overhead", "bf16", "fp16", "b'x'", "1j", "...", "((((((((1))))))))",
                     "/", ".", "..", "/dev/null", "/nonexistent/data.yaml", "coco8.yaml", "x.pt", "a\x00b", "cv2.X"]),
)
WORD = st.one_of(st.builds(lambda k, v: f"{k}={v}", st.sampled_from(KEYS), VALUES), st.text(max_size=16),
                 st.sampled_from(["=", "==", "batch", "--", "-", "--json", "--help-me", "a=b=c"]))


@FUZZ
@given(words=st.lists(WORD, max_size=4))
def test_check_arguments(words, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    count("check KEY=VALUE")
    code, out, err = cli(["check", *words, "--json", "--warm"])
    assert_contract(code, out, err)


class Reached(BaseException):
    """The profile command got as far as starting the training (stubbed): its arguments were accepted."""


@FUZZ
@given(words=st.lists(WORD, max_size=4),
       opts=st.lists(st.tuples(st.sampled_from(["--steps", "--sample-hz", "--loader-seconds", "--fail-on", "--out"]),
                               VALUES), max_size=2))
@example(words=["--"], opts=[("--steps", "5")])  # words after `--` are a program to profile
def test_profile_arguments(words, opts, tmp_path, monkeypatch):
    """Everything up to the training itself (which is stubbed): argument parsing, option checks and the pre-flight
    check of the dataset."""
    from yolodoctor.profiling import runner

    def reached(args, **kw):
        raise Reached(args, kw.get("command"))

    monkeypatch.setattr(runner, "run_profile", reached)
    monkeypatch.chdir(tmp_path)
    count("profile KEY=VALUE")
    argv = ["profile", *words, *[x for o in opts for x in o], "--json"]
    try:
        code, out, err = cli(argv)
    except Reached as r:  # KEY=VALUE mode with validated arguments, or words after `--` taken as a program
        args, command = r.args
        assert (isinstance(args, dict) and "model" in args and not command) or (args is None and command)
        return
    assert code == 2 and out == "" and one_line_error(err), (argv, code, err)


@FUZZ
@given(words=st.lists(WORD, min_size=1, max_size=3), reps=st.sampled_from([None, "0", "1", "10", "x", "-3"]))
def test_fix_try_arguments(words, reps):
    count("fix --try")
    argv = ["fix", FIXTURE, "--json", *[x for w in words for x in ("--try", w)]] + (["--reps", reps] if reps else [])
    code, out, err = cli(argv)
    assert_contract(code, out, err, ok=(0,))


# ---------------------------------------------------------------------------------------------------------------------
# Profiles and event streams (diagnose, compare, fix)

JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=12),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=8)
SECTIONS = ["summary", "settings", "trace", "loader_capacity", "check_facts", "files", "args"]


def mutate(doc: dict, section: str | None, key: str | None, value, delete: bool) -> dict:
    doc = json.loads(json.dumps(doc))
    target = doc if section is None else doc.get(section)
    if not isinstance(target, dict):
        doc[section] = value
        return doc
    keys = sorted(target) or ["x"]
    k = key if key is not None else keys[0]
    if delete:
        target.pop(k, None)
    else:
        target[k] = value
    return doc


MUTATION = st.tuples(st.none() | st.sampled_from(SECTIONS),
                     st.none() | st.sampled_from(sorted({k for s in SECTIONS for k in (PROFILE.get(s) or {})}
                                                        | set(PROFILE) | {"window", "images_per_s", "steps"})),
                     JSON, st.booleans())


def mutated(changes) -> str:
    doc = PROFILE
    for section, key, value, delete in changes:
        doc = mutate(doc, section, key, value, delete)
    return json.dumps(doc, allow_nan=True)


PROFILE_TEXT = st.one_of(
    st.lists(MUTATION, min_size=1, max_size=5).map(mutated),
    st.text(max_size=80),
    st.sampled_from(["", "null", "[]", "{}", '{"schema": 1}', '{"schema": "1"}', "[" * 100_000, "NaN",
                     json.dumps({**PROFILE, "schema": 2}), json.dumps(PROFILE)[:500], "\udcff"]),
)
EVENT_LINES = st.lists(st.one_of(
    st.builds(lambda t, rec: json.dumps({"type": t, **rec}, allow_nan=True),
              st.sampled_from(["step", "settings", "epoch_end", "train_end", "run_end", "trace", "workers",
                               "loader_capacity", "fit_epoch_end", "nonfinite_loss", "sample"]),
              st.dictionaries(st.sampled_from(["step", "t", "t0", "t1", "wait", "compute", "images", "loss", "epoch",
                                               "n", "settings", "train_index", "status", "gpu", "cpu", "roles",
                                               "batch", "accumulate", "warmup", "traced", "metrics"]), JSON,
                              max_size=6)),
    st.text(max_size=40)), max_size=5)


@FUZZ
@given(text=PROFILE_TEXT, events=EVENT_LINES)
@example(text=json.dumps(PROFILE), events=['{"type": "step", "step": null}'])  # found by this test: a crash
@example(text=json.dumps({**PROFILE, "files": {"events": "/dev/zero", "samples": "../../x"}}), events=[])
def test_profiles_and_events(text, events, tmp_path):
    run = tmp_path / "run"
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir()
    (run / "profile.json").write_text(text, errors="surrogatepass")
    shutil.copy(FIXTURE / "samples.jsonl.gz", run)
    lines = [json.dumps(e) for e in EVENTS] + events
    (run / "events.jsonl").write_text("\n".join(lines) + "\n", errors="surrogatepass")
    for argv, ok in ((["diagnose", run, "--json"], (0, 1)), (["compare", FIXTURE, run, "--json"], (0,)),
                     (["fix", run, "--json"], (0,))):
        count("profile.json + events")
        code, out, err = cli(argv)
        assert_contract(code, out, err, ok=ok)


def test_non_finite_numbers_in_a_profile_give_strict_json(tmp_path):
    """JSON allows no NaN or Infinity; Python's json module reads and writes them. A profile.json holding them (hand
    edited, or from another tool) still gives strict JSON on stdout, and no fact is made of them."""
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    doc = json.loads((run / "profile.json").read_text())
    for section in ("settings", "summary"):
        doc[section] = {k: (float("nan") if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
                        for k, v in doc[section].items()}
    doc["settings"]["workers_requested"] = float("inf")
    (run / "profile.json").write_text(json.dumps(doc, allow_nan=True))
    for argv in (["diagnose", run, "--json"], ["fix", run, "--json"], ["compare", FIXTURE, run, "--json"]):
        code, out, err = cli(argv)
        assert code in (0, 1) and "internal error" not in err, (argv, err)
        facts = json.loads(out, parse_constant=lambda c, argv=argv: pytest.fail(f"{c} in {argv}"))["facts"]
        assert "run.images_per_s" not in facts and "run.batch_started" not in facts  # (run.batch: the steps')


# ---------------------------------------------------------------------------------------------------------------------
# Rule files (rules, diagnose --rules)

GOOD_RULE = {
    "id": "XX101", "name": "slow-steps", "category": "launch", "severity": "warning",
    "facts": ["run.step_s", "run.batch"], "condition": "run.step_s > 0.05",
    "message": "steps take {run.step_s:.2f} s at batch {run.batch:.0f}",
    "fix": {"args": {"batch": "int(min(64.0, run.batch * 2.0))"}, "seconds_saved_per_epoch": "run.step_s * 10.0"},
    "docs": {"what": "slow steps", "why": "time", "fix": "bigger batch"},
}
CEL_BITS = st.sampled_from(["run.step_s", "run.batch", "1.0", "true", "&&", "||", "!", ">", "==", "(", ")", "'x'",
                            "size(", "[", "]", "{", "}", "?", ":", "__import__('os')", "open('/etc/passwd')",
                            "run.step_s.__class__", "gpu.util_mean", "int(", "double(", "1/0", "ceil(", "{0}",
                            "{run.step_s!r}", "{run.step_s:>{0}}", "{run.step_s:>999999999}", "%s",
                            "matches('.*')", "[1, 2].map(a, a)", ".all(x, x)"])
RULE_VALUE = st.one_of(JSON, st.lists(CEL_BITS, max_size=6).map(" ".join))
RULE_TEXT = st.one_of(
    st.builds(lambda field, sub, value: yaml.safe_dump(_set(GOOD_RULE, field, sub, value), allow_unicode=True),
              st.sampled_from(sorted(GOOD_RULE)), st.none() | st.sampled_from(["args", "what", "batch", "safety",
                                                                                "seconds_saved_per_epoch", "env"]),
              RULE_VALUE),
    st.text(max_size=120),
    st.sampled_from(["", "- a\n- b\n", "id: [unclosed", "!!python/object/apply:os.system ['true']",
                     "a: &a [*a]\n", "x: " + "[" * 5000]),
)


def _set(rule: dict, field: str, sub: str | None, value) -> dict:
    doc = json.loads(json.dumps(rule))
    if sub is not None and isinstance(doc.get(field), dict):
        doc[field][sub] = value
    else:
        doc[field] = value
    return doc


@FUZZ
@given(text=RULE_TEXT)
@example(text=yaml.safe_dump({**GOOD_RULE, "message": "{run.step_s:>{0}}"}))  # found by this test: a crash
def test_rule_files(text, tmp_path):
    d = tmp_path / "rules"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    (d / "r.yaml").write_text(text, errors="surrogatepass")
    count("rule files")
    code, out, err = cli(["rules", "--rules", d, "--json"])
    assert_contract(code, out, err, ok=(0,))
    if code == 2:
        assert "r.yaml" in err or "rule" in err
        return
    count("rule files")
    code, out, err = cli(["diagnose", FIXTURE, "--rules", d, "--json"])
    assert_contract(code, out, err)


# ---------------------------------------------------------------------------------------------------------------------
# data.yaml and labels before a profile (check's own fuzzing is in tests/commands/test_check_cli.py)

YAML_VALUE = st.one_of(JSON, st.sampled_from(["images/train", "images", "../x", "/nonexistent", "."]))
DATA_TEXT = st.one_of(
    st.dictionaries(st.sampled_from(["train", "val", "test", "names", "nc", "path", "kpt_shape", "download",
                                     "channels"]), YAML_VALUE, max_size=6).map(
        lambda d: yaml.safe_dump(d, allow_unicode=True)),
    st.text(max_size=120),
    st.just("a0: &a0 [x, x, x, x, x, x, x, x, x]\n"
            + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9))
            + "train: .\nval: .\nnames: *a8\n"),  # an alias bomb
)


@FUZZ
@given(text=DATA_TEXT, labels=st.binary(max_size=120))
def test_profile_data_yaml_and_labels(text, labels, tmp_path, monkeypatch):
    """A data.yaml that cannot load stops `profile` with exit 2 before any training; one that loads reaches it."""
    from yolodoctor.profiling import runner

    def reached(args, **kw):
        raise Reached(args)

    monkeypatch.setattr(runner, "run_profile", reached)
    root = tmp_path / "ds"
    for sub in ("images/train", "labels/train"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "labels" / "train" / "a.txt").write_bytes(labels)
    (root / "images" / "train" / "a.jpg").write_bytes(b"\xff\xd8\xff" + labels)
    (root / "data.yaml").write_text(text, errors="surrogatepass")
    count("profile data.yaml + labels")
    try:
        code, out, err = cli(["profile", f"data={root / 'data.yaml'}", "--json"])
    except Reached:
        return
    assert code == 2 and out == "" and one_line_error(err), err


# ---------------------------------------------------------------------------------------------------------------------
# A few cases through real processes: the exit codes themselves


@pytest.mark.parametrize("argv,needle", [
    (["profile", "bach=3"], "did you mean batch"),
    (["profile", "batch=[[[1]]]"], "batch"),
    (["profile", "--steps", "0"], "--steps"),
    (["fix", FIXTURE, "--try", "project=/tmp/elsewhere"], "only tries"),
    (["diagnose", "{broken}"], "cannot read"),
    (["compare", FIXTURE, "{broken}"], "cannot read"),
    (["rules", "--rules", "{bomb}"], "aliases expand"),
])
def test_exit_codes_in_real_processes(argv, needle, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "profile.json").write_text("{\"schema\": 1, \"status\": ")
    bomb = tmp_path / "bomb"
    bomb.mkdir()
    (bomb / "r.yaml").write_text("a0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10)))
    p = yd(*[str(a).format(broken=broken, bomb=bomb) for a in argv], cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and p.stdout == "" and one_line_error(p.stderr) and needle in p.stderr, p.stderr


def test_every_property_ran_its_cases(capsys):
    """Each property that ran in this pytest run tried at least half its examples (hypothesis gives up early when a
    strategy can hardly produce data); prints the counts behind docs/reliability.md's figures."""
    with capsys.disabled():
        print(f"\nfuzz cases tried: {sum(TRIED.values())} {TRIED}")
    assert all(n >= EXAMPLES // 2 for n in TRIED.values()), TRIED
