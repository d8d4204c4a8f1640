"""The rule format beyond one condition and one message: evidence mappings, optional facts, values, cases, forms and
per-item rules (each), as rules.py documents them; and the load-time checks that refuse a rule misusing them."""

from __future__ import annotations

import pytest

from yolodoctor.diagnosis.engine import evaluate
from yolodoctor.diagnosis.rules import RuleError, load_rules

DOCS = "docs: {what: w, why: y, fix: f}\n"


def rules(tmp_path, text: str):
    d = tmp_path / "rules"
    d.mkdir(exist_ok=True)
    (d / "r.yaml").write_text(text + DOCS)
    return load_rules([d], builtin=False)


def run(tmp_path, text: str, facts: dict):
    found, outcomes = evaluate(rules(tmp_path, text), facts)
    return found, outcomes[0]


PER_ITEM = """
id: XX201
name: many-bad-files
category: dataset
severity: warning
each: dataset.defects
facts: [dataset.images, item.kind, item.files, item.examples]
values:
  share: item.files / dataset.images
  files: plural(item.files, 'file')
condition: share > 0.1
message: "{files} of {dataset.images} ({share:.0%}) are {item.kind}"
evidence: {files: item.files, examples: item.examples}
cases:
  - when: share > 0.5
    severity: error
"""
DEFECTS = [
    {"kind": "img_corrupt", "files": 3, "examples": [{"file": "a.jpg", "reason": "x"}]},
    {"kind": "lbl_dup", "files": 1, "rows": 4, "examples": []},
    {"kind": "no_label", "files": 6, "examples": [{"file": "b.jpg"}]},
    {"kind": "img_small", "examples": []},  # no files field: this item is skipped
]


def test_each_makes_one_finding_per_item_the_condition_holds_for(tmp_path):
    found, outcome = run(tmp_path, PER_ITEM, {"dataset.images": 10, "dataset.defects": DEFECTS})
    assert outcome.state == "fired"
    by_kind = {f.message.split(" are ")[1]: f for f in found}
    assert set(by_kind) == {"img_corrupt", "no_label"}  # 10% is not above 10%; the item without files is skipped
    assert by_kind["img_corrupt"].message == "3 files of 10 (30%) are img_corrupt"
    assert by_kind["img_corrupt"].severity.name == "warning" and by_kind["no_label"].severity.name == "error"
    assert by_kind["img_corrupt"].evidence == {"files": 3, "examples": [{"file": "a.jpg", "reason": "x"}]}
    assert run(tmp_path, PER_ITEM, {"dataset.images": 10, "dataset.defects": []})[1].state == "false"
    assert run(tmp_path, PER_ITEM, {"dataset.images": 10})[1].state == "missing"


FORMS = """
id: XX202
name: two-sources
category: dataloader
severity: info
facts: [settings.workers_asked, settings.workers]
condition: settings.workers < settings.workers_asked
message: "ran {settings.workers:.0f} of {settings.workers_asked:.0f}"
forms:
  - facts: [loader.workers_requested, loader.workers_effective]
    condition: loader.workers_effective < loader.workers_requested
    message: "will start {loader.workers_effective:.0f} of {loader.workers_requested:.0f}"
    severity: warning
    fix: {args: {workers: "int(loader.workers_effective)"}}
"""


def test_forms_report_one_finding_from_other_facts(tmp_path):
    found, _ = run(tmp_path, FORMS, {"settings.workers_asked": 8.0, "settings.workers": 2.0})
    assert [(f.message, f.severity.name, f.fix) for f in found] == [("ran 2 of 8", "info", None)]
    found, _ = run(tmp_path, FORMS, {"loader.workers_requested": 8, "loader.workers_effective": 4})
    assert [(f.id, f.message, f.severity.name) for f in found] == [("XX202", "will start 4 of 8", "warning")]
    assert found[0].fix.args == {"workers": 4} and found[0].evidence == {"loader.workers_requested": 8,
                                                                         "loader.workers_effective": 4}
    assert run(tmp_path, FORMS, {})[1].state == "missing"


CASES = """
id: XX203
name: variants
category: environment
severity: warning
facts: [env.font_present]
optional: [env.online]
condition: "!env.font_present"
message: "no font (online: {env.online})"
evidence: {online: env.online, cores: cpu.usable, literal: 3}
fix: {env: {YOLO_OFFLINE: "'1'"}}
cases:
  - when: env.online == true
    severity: info
    fix: null
  - when: cpu.usable > 4.0
    facts: [cpu.usable]
    message: "no font, {cpu.usable:g} cores"
"""


def test_cases_replace_what_they_set_and_read_their_own_facts(tmp_path):
    with pytest.raises(RuleError, match="evidence cores reads cpu, not among its facts"):
        rules(tmp_path, CASES)  # the rule's own evidence may not read a fact only a case reads
    text = CASES.replace("evidence: {online: env.online, cores: cpu.usable, literal: 3}",
                         "evidence: {online: env.online, literal: 3}")
    found, _ = run(tmp_path, text, {"env.font_present": False})  # online missing: read as null
    assert (found[0].severity.name, found[0].message, found[0].fix.env) == ("warning", "no font (online: n/a)",
                                                                            {"YOLO_OFFLINE": "1"})
    assert found[0].evidence == {"online": None, "literal": 3}
    found, _ = run(tmp_path, text, {"env.font_present": False, "env.online": True})
    assert (found[0].severity.name, found[0].fix) == ("info", None)
    found, _ = run(tmp_path, text, {"env.font_present": False, "env.online": False, "cpu.usable": 8.0})
    assert (found[0].severity.name, found[0].message) == ("warning", "no font, 8 cores")
    assert run(tmp_path, text, {"env.font_present": True})[1].state == "false"


def test_values_that_cannot_be_computed_are_null_and_repr_shows_a_value_as_python_writes_it(tmp_path):
    text = """
id: XX204
name: values
category: config
severity: info
facts: [args.amp, env.nvml_gpu_names]
values:
  first: env.nvml_gpu_names[0]
condition: args.amp != false
message: "amp={args.amp!r} on {first}"
"""
    assert run(tmp_path, text, {"args.amp": "bf16", "env.nvml_gpu_names": ["T4"]})[0][0].message == "amp='bf16' on T4"
    assert run(tmp_path, text, {"args.amp": True, "env.nvml_gpu_names": []})[0][0].message == "amp=True on n/a"
    assert run(tmp_path, text, {"args.amp": False, "env.nvml_gpu_names": []})[1].state == "false"


BAD = """
id: XX205
name: bad
category: dataset
severity: info
each: dataset.defects
facts: [item.kind]
condition: item.kind == 'x'
message: "{item.kind}"
"""


@pytest.mark.parametrize("change,needle", [
    (("condition: item.kind == 'x'", "condition: item.files > 1.0"), "reads item.files, not among its facts"),
    (("facts: [item.kind]", "facts: [item.kind, item.nope]"), "unknown item field 'item.nope'"),
    (("each: dataset.defects", "each: dataset.images"), "not a list fact"),
    (("each: dataset.defects\n", ""), "reads an item, but the rule has no `each`"),
    (('message: "{item.kind}"', 'message: "{item.kind!s}"'), "the only conversion is !r"),
    (('message: "{item.kind}"', 'message: "{item.files}"'), "not one of the rule's facts or values"),
    (("condition: item.kind == 'x'", "values: {dataset: '1.0'}\ncondition: item.kind == 'x'"), "value name"),
    (("condition: item.kind == 'x'", "values: {n: 'item.kind.exists(x, x)'}\ncondition: item.kind == 'x'"),
     "comprehension macro"),
    (("condition: item.kind == 'x'", "condition: item.kind == 'x'\ncases: [{when: item.rows > 1.0}]"),
     "reads item.rows"),
    (("condition: item.kind == 'x'", "condition: item.kind == 'x'\nforms: [{facts: [], condition: 'true'}]"),
     "message"),
])
def test_misused_features_are_refused_at_load(tmp_path, change, needle):
    with pytest.raises(RuleError) as e:
        rules(tmp_path, BAD.replace(*change))
    assert needle in str(e.value) and "XX205" in str(e.value)
