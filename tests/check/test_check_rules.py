"""check's findings are the rules' verdicts on its facts: the thresholds are in the rule files, and a folder of user
rules (`check --rules DIR`) judges the same facts."""

import json
import os
import subprocess
import sys
from pathlib import Path

from yolodoctor.diagnosis.engine import evaluate
from yolodoctor.diagnosis.rules import builtin_dir, builtin_rules, load_rules

ROOT = Path(__file__).resolve().parents[2]
DATASETS = ROOT / "fixtures" / "datasets"
SLOW_DECODE = {"env.device_kind": "cuda", "io.decode_ms_median": 30.0, "io.resize_ms_median": 5.0, "io.workers": 8,
               "dataset.image_formats": {"png": 3}, "dataset.image_size_median": [4000, 3000]}


def test_the_loader_floor_is_in_the_rule_not_the_probe(tmp_path):
    # 35 ms per image on 8 workers: 229 images/s, below IO103's 300; the same rule with a floor of 200 stays silent
    assert "IO103" in [f.id for f in evaluate(builtin_rules(), SLOW_DECODE)[0]]
    text = (Path(str(builtin_dir())) / "IO103-decode-limits-loader.yaml").read_text()
    assert "ceiling < 300.0" in text
    (tmp_path / "r.yaml").write_text(text.replace("IO103", "XX103").replace("ceiling < 300.0", "ceiling < 200.0"))
    lower = load_rules([tmp_path], builtin=False)
    assert evaluate(lower, SLOW_DECODE)[0] == []
    assert [f.id for f in evaluate(lower, {**SLOW_DECODE, "io.workers": 4})[0]] == ["XX103"]  # 114 images/s


USER_RULE = """
id: XX301
name: any-corrupt-image
category: dataset
severity: warning
each: dataset.defects
facts: [item.kind, item.files, item.examples]
condition: item.kind == 'img_corrupt' && item.files >= 1.0
message: "{item.files} corrupt image(s), e.g. {first}"
values:
  first: item.examples[0].file
evidence: {examples: item.examples}
docs: {what: corrupt images, why: a stricter house rule, fix: delete them}
"""


def test_check_judges_its_facts_with_a_folder_of_user_rules(tmp_path):
    (tmp_path / "r.yaml").write_text(USER_RULE)
    p = subprocess.run([sys.executable, "-m", "yolodoctor", "check", f"data={DATASETS / 'corrupt-image' / 'data.yaml'}",
                        "--json", "--warm", "--rules", str(tmp_path), "--fail-on", "warning"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT, env={**os.environ, "YOLO_OFFLINE": "1"})
    assert p.returncode == 1, p.stderr
    found = {f["id"]: f for f in json.loads(p.stdout)["findings"]}
    assert "DS106" in found and found["XX301"]["message"].startswith("1 corrupt image(s), e.g. ")
    assert found["XX301"]["message"].endswith("images/train/b.jpg")
    (tmp_path / "r.yaml").write_text(USER_RULE.replace("item.files >= 1.0", "item.nope >= 1.0"))
    p = subprocess.run([sys.executable, "-m", "yolodoctor", "check", "--rules", str(tmp_path)],
                       capture_output=True, text=True, timeout=120, cwd=ROOT, env={**os.environ, "YOLO_OFFLINE": "1"})
    assert p.returncode == 2 and "XX301" in p.stderr and "Traceback" not in p.stderr
