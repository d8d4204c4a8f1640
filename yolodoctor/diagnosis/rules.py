"""Rules as data: YAML files in the top-level rules/ folder (shipped in the package), one rule per file.

A rule file:

    id: LA201                      # two or three letters and three digits
    name: host-bound               # kebab-case
    category: launch               # one of findings.CATEGORIES
    severity: warning              # info | warning | error
    facts: [run.data_wait_share, gpu.util_mean]   # every fact the rule reads; all must be present, else silent
    condition: run.data_wait_share < 0.1 && gpu.util_mean < 50.0      # CEL (Common Expression Language)
    message: "The GPU is busy {gpu.util_mean:.0f}% ..."                  # {fact} or {fact:format}, nothing else
    evidence: [run.data_wait_share]          # facts shown with the finding (default: all of `facts`)
    fix:                                     # optional, DESIGN.md section 3 shape; strings are CEL expressions
      args: {batch: "64"}
      safety: safe
      changes_training: false
      seconds_saved_per_epoch: "run.epoch_s * 0.5"
    docs:
      what: What it detects.
      why: Why it matters.
      fix: How to fix.

Conditions are CEL, evaluated by the `common-expression-language` library: no statements, no imports, no I/O, no
attribute access beyond the facts. At load time every condition and fix expression is compiled, its functions are
checked against an allow-list, and it is evaluated once on placeholder facts, so that a rule that names an
undeclared fact, calls anything else, or does not give a boolean is rejected (exit 2) before any rule runs.
"""

from __future__ import annotations

import importlib.resources
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from yolodoctor import yamlsafe
from yolodoctor.diagnosis import template
from yolodoctor.diagnosis.facts import CATALOGUE
from yolodoctor.errors import InputError
from yolodoctor.findings import CATEGORIES

ALLOWED_FUNCTIONS = {
    "_&&_", "_||_", "!_", "_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_", "_+_", "_-_", "_*_", "_/_", "_%_", "-_",
    "_?_:_", "@in", "_[_]", "size", "has", "int", "double", "string", "bool", "min", "max", "abs", "ceil", "floor",
    "contains", "startsWith", "endsWith", "matches",
}
PLACEHOLDER = {"double": 1.5, "bool": True, "string": "x"}
# Numeric helpers CEL's standard library lacks; pure functions of numbers, nothing else is callable from a rule.
FUNCTIONS = {
    "min": lambda a, b: min(a, b),
    "max": lambda a, b: max(a, b),
    "ceil": lambda a: float(math.ceil(a)),
    "floor": lambda a: float(math.floor(a)),
    "abs": lambda a: abs(a),
}
ID = re.compile(r"^[A-Z]{2,3}\d{3}$")
NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class RuleError(InputError):
    """An invalid rule file: exit 2 with the file, the rule id and what is wrong."""


class FixSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    args: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, Any] = Field(default_factory=dict)
    torch_flags: dict[str, Any] = Field(default_factory=dict)
    safety: Literal["safe", "unsafe"] = "safe"
    changes_training: bool = False
    seconds_saved_per_epoch: str | float | None = None
    one_off_seconds: str | float | None = None
    note: str | None = None


class Docs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    what: str
    why: str
    fix: str


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    name: str
    category: str
    severity: Literal["info", "warning", "error"]
    facts: list[str]
    condition: str
    message: str
    evidence: list[str] | None = None
    fix: FixSpec | None = None
    docs: Docs
    source: str = ""  # the file it came from (set by the loader)

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not ID.match(v):
            raise ValueError("id must be 2-3 capital letters and 3 digits, e.g. DL201")
        return v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME.match(v):
            raise ValueError("name must be kebab-case, e.g. dataloader-too-few-workers")
        return v

    @field_validator("category")
    @classmethod
    def _category(cls, v: str) -> str:
        if v not in CATEGORIES:
            raise ValueError(f"category must be one of {', '.join(CATEGORIES)}")
        return v

    @property
    def shown(self) -> list[str]:
        return self.evidence if self.evidence is not None else self.facts


@dataclass
class Compiled:
    rule: Rule
    condition: Any  # cel.Program
    fix_exprs: dict[str, Any]  # "args.workers" -> cel.Program


def nest(flat: dict[str, Any]) -> dict[str, Any]:
    """{"loader.workers": 8} -> {"loader": {"workers": 8}}: CEL reads dotted facts as field selections."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        node = out
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                break
        else:
            node[leaf] = value
    return out


def context(flat: dict[str, Any]):
    """A CEL evaluation context: the facts (nested) and the numeric helpers."""
    import cel

    ctx = cel.Context()
    for name, fn in FUNCTIONS.items():
        ctx.add_function(name, fn)
    ctx.update(nest(flat))
    return ctx


# CEL's comprehension macros loop; nested, they take exponential time (six nested .map() over ten items: minutes).
# Rules compare facts and need no loops, so the macros are refused (string literals are blanked before the search).
MACROS = re.compile(r"\.\s*(all|exists_one|exists|map|filter|transformList|transformMapEntry|transformMap|sortBy)"
                    r"\s*\(")
STRINGS = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


def _compile(expr: str, rule: Rule, where: str):
    import cel

    macro = MACROS.search(STRINGS.sub("''", expr))
    if macro:
        raise RuleError(f"{rule.source}: rule {rule.id}: {where} uses the comprehension macro {macro.group(1)}(), "
                        "which rules may not use")
    try:
        prog = cel.compile(expr)
    except Exception as e:  # the library raises ValueError with a caret diagram
        raise RuleError(f"{rule.source}: rule {rule.id}: {where} does not parse: {str(e).splitlines()[0]}") from None
    refs = prog.references()
    bad = sorted(set(refs.get("functions", [])) - ALLOWED_FUNCTIONS)
    if bad:
        raise RuleError(f"{rule.source}: rule {rule.id}: {where} calls {', '.join(bad)}, which rules may not use")
    roots = {f.split(".")[0] for f in rule.facts}
    unknown = sorted(set(refs.get("variables", [])) - roots)
    if unknown:
        raise RuleError(f"{rule.source}: rule {rule.id}: {where} reads {', '.join(unknown)}, not among its facts")
    return prog


def _dry_run(prog, rule: Rule, where: str, want_bool: bool) -> None:
    ctx = context({f: PLACEHOLDER[CATALOGUE[f][0]] for f in rule.facts})
    try:
        value = prog.execute(ctx)
    except Exception as e:
        msg = str(e).split(". ")[0]
        raise RuleError(f"{rule.source}: rule {rule.id}: {where} fails on its declared facts: {msg}") from None
    if want_bool and not isinstance(value, bool):
        raise RuleError(f"{rule.source}: rule {rule.id}: {where} must give true or false, not {type(value).__name__}")


def compile_rule(rule: Rule) -> Compiled:
    for f in rule.facts + (rule.evidence or []):
        if f not in CATALOGUE:
            raise RuleError(f"{rule.source}: rule {rule.id}: unknown fact {f!r} (see `yolodoctor rules --facts`)")
    if rule.evidence and set(rule.evidence) - set(rule.facts):
        raise RuleError(f"{rule.source}: rule {rule.id}: evidence must be among its facts")
    cond = _compile(rule.condition, rule, "condition")
    _dry_run(cond, rule, "condition", want_bool=True)
    try:
        template.validate(rule.message, set(rule.facts))
    except template.TemplateError as e:
        raise RuleError(f"{rule.source}: rule {rule.id}: message: {e}") from None
    exprs: dict[str, Any] = {}
    if rule.fix:
        items = [(f"args.{k}", v) for k, v in rule.fix.args.items()]
        items += [(f"env.{k}", v) for k, v in rule.fix.env.items()]
        items += [(f"torch_flags.{k}", v) for k, v in rule.fix.torch_flags.items()]
        items += [(k, getattr(rule.fix, k)) for k in ("seconds_saved_per_epoch", "one_off_seconds")]
        for key, value in items:
            if isinstance(value, str):
                exprs[key] = _compile(value, rule, f"fix {key}")
                _dry_run(exprs[key], rule, f"fix {key}", want_bool=False)
    return Compiled(rule, cond, exprs)


def parse_rule_file(path: Path, text: str) -> Rule:
    try:
        raw = yamlsafe.safe_load(text)  # safe_load, and no alias bomb
    except yaml.YAMLError as e:
        raise RuleError(f"{path}: not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(raw, dict):
        raise RuleError(f"{path}: a rule file must hold one mapping (id, name, category, ...)")
    rid = raw.get("id", "?")
    try:
        rule = Rule.model_validate({**raw, "source": str(path)})
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "rule"
        raise RuleError(f"{path}: rule {rid}: {where}: {err['msg']}") from None
    return rule


def builtin_dir():
    """The shipped rules: the installed package yolodoctor.builtin_rules, else the source tree's rules/."""
    try:
        return importlib.resources.files("yolodoctor.builtin_rules")
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "rules"


def load_rules(extra_dirs: list[str | Path] | None = None, *, builtin: bool = True) -> list[Compiled]:
    """Built-in rules, then each folder of user rules (a user rule may not reuse a built-in id)."""
    sources: list[tuple[Path, str]] = []
    if builtin:
        for entry in sorted(builtin_dir().iterdir(), key=lambda p: p.name):
            if entry.name.endswith((".yaml", ".yml")):
                sources.append((Path(str(entry)), entry.read_text(encoding="utf-8")))
    for d in extra_dirs or []:
        d = Path(d)
        if not d.is_dir():
            raise RuleError(f"rules folder not found: {d}")
        files = sorted(list(d.glob("*.yaml")) + list(d.glob("*.yml")))
        if not files:
            raise RuleError(f"no rule files (*.yaml) in {d}")
        for p in files:
            try:
                sources.append((p, p.read_text(encoding="utf-8")))
            except (OSError, UnicodeDecodeError) as e:
                raise RuleError(f"{p}: cannot read: {e}") from None
    compiled: list[Compiled] = []
    seen: dict[str, str] = {}
    for path, text in sources:
        rule = parse_rule_file(path, text)
        if rule.id in seen:
            raise RuleError(f"{path}: rule {rule.id}: id already used by {seen[rule.id]}")
        seen[rule.id] = str(path)
        compiled.append(compile_rule(rule))
    return compiled
