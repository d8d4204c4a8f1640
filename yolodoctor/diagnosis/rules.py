"""Rules as data: YAML files in the top-level rules/ folder (shipped in the package), one rule per file.

Every finding any command reports comes from one of these rules, evaluated by the engine (engine.py) over facts
(facts.py): the profile's, diagnose's and the monitor's facts of a training, and the facts `check`'s probes measure
before one. `yolodoctor rules` lists them and `yolodoctor rules ID` prints one's documentation.

A rule file:

    id: LA201                      # two or three letters and three digits: the letters name the area, the hundreds
                                   # when it can fire (0xx the data.yaml, 1xx before training, 2xx only from a
                                   # training; commands/diagnose.ID_SCHEME, printed by `yolodoctor rules`)
    name: host-bound               # kebab-case
    category: launch               # one of findings.CATEGORIES
    severity: warning              # info | warning | error
    facts: [run.data_wait_share, gpu.util_mean]   # every fact the rule reads; all must be present, else silent
    optional: [cpu.quota]          # facts it may read that may be missing: they read as null
    values:                        # named CEL expressions over the facts, computed in order before the condition
      busy: gpu.util_mean / 100.0  #   (null where one cannot be computed); the condition, message, evidence, fix
                                   #   and cases may use them
    condition: run.data_wait_share < 0.1 && gpu.util_mean < 50.0      # CEL (Common Expression Language)
    message: "The GPU is busy {gpu.util_mean:.0f}% ..."   # {name}, {name:format} or {name!r}: a fact or a value
    evidence: [run.data_wait_share]   # facts shown with the finding (default: all of `facts` and `optional`); or a
                                      # mapping of names to CEL expressions ({workers: settings.workers}: a term that
                                      # names a fact, item field or value shows it as recorded); or one expression
                                      # whose value, a mapping, is the evidence (evidence: item.detail)
    fix:                              # optional, a Fix (findings.py); strings are CEL expressions
      args: {batch: "64"}
      safety: safe
      changes_training: false
      seconds_saved_per_epoch: "run.epoch_s * 0.5"
    tasks: [detect, segment, pose, obb]   # optional: the tasks it applies to (default all); for a training of
                                          # another task (settings.task, dataset.task) it stays silent, and
                                          # `diagnose --explain` says why
    docs:
      what: What it detects.
      why: Why it matters.
      fix: How to fix.

Thresholds live in the conditions: the facts are what was measured (counts, seconds, bytes, shares), and the rule
compares them. A fact that could not be measured is missing, and a rule that reads it stays silent.

Variants of one finding (`cases`). Where the rule's condition holds, its cases are tried in order; the first whose
`when` holds (and whose own extra `facts` are present) replaces any of severity, message, evidence and fix it sets
(`fix: null` drops the fix):

    severity: error
    cases:
      - when: item.missing_share_max <= 0.1      # DS101: images without labels, at most 10% of every split
        severity: warning

Other forms of one finding (`forms`). A form reads other facts than the rule, for the same finding seen by another
command: DL102 reads the run's record in the rule and check's prediction before training in a form. A form has its
own facts, optional, values, condition, message, evidence, fix and cases (nothing of the rule's but its severity,
unless it sets one). The rule's own form is tried first, then each form; the first that fires makes the finding.

Findings per item (`each`). A rule whose `each` names a list-valued fact (its items described in the catalogue,
`yolodoctor rules --facts`) is evaluated once per item, the item read as `item` (`item.files`, `{item.kind}`), and
makes one finding per item its condition holds for. The item fields a rule reads are declared in `facts` or
`optional` like facts (`item.files`); an item that lacks a declared field is skipped. Check's dataset probe lists
its per-file verdicts this way: one item per kind of defect, with the number of files and rows and the files
themselves as examples, so a rule says one thing about all files with that defect:

    each: dataset.defects
    facts: [dataset.images, item.kind, item.files, item.examples]
    condition: item.kind == 'img_corrupt' && item.files > 0.0
    message: "{item.files:.0f} of {dataset.images:.0f} images cannot be read as images"
    evidence: {files: item.files, examples: item.examples}

Conditions are CEL, evaluated by the `common-expression-language` library: no statements, no imports, no I/O, no
attribute access beyond the facts, no loops (comprehension macros are refused). At load time every expression is
compiled and its functions are checked against an allow-list, and every condition, case, evidence and fix
expression is evaluated once on placeholder facts, so that a rule that names an undeclared fact or item field,
calls anything else, or does not give a boolean is rejected (exit 2) before any rule runs. Besides CEL's own
functions a rule may call min, max, abs, ceil, floor, round(x, digits) and plural(n, noun) ("1 file", "3 files").

`diagnose`, `profile` and the monitor evaluate the rules over a training's facts, `check` over its probes' facts
(`diagnose` and `check` take --rules DIR, a folder of your own rules, which may not reuse a built-in id). A rule
reads only the facts it declares, and the other command's facts are missing there, so it stays silent where it does
not apply.
"""

from __future__ import annotations

import functools
import importlib.resources
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

if TYPE_CHECKING:
    import cel  # imported where a rule is compiled or run: importing yolodoctor stays cheap

from yolodoctor import yamlsafe
from yolodoctor.diagnosis import template
from yolodoctor.diagnosis.facts import CATALOGUE, ITEMS
from yolodoctor.errors import InputError
from yolodoctor.findings import CATEGORIES

ALLOWED_FUNCTIONS = {
    "_&&_", "_||_", "!_", "_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_", "_+_", "_-_", "_*_", "_/_", "_%_", "-_",
    "_?_:_", "@in", "_[_]", "size", "has", "int", "double", "string", "bool", "min", "max", "abs", "ceil", "floor",
    "round", "plural", "contains", "startsWith", "endsWith", "matches",
}
PLACEHOLDER = {"double": 1.5, "bool": True, "string": "x", "list": ["x"], "map": {}, "any": "x"}


def _plural(n: float, noun: str) -> str:
    k = int(n)
    return f"{k} {noun}" if k == 1 else f"{k} {noun}s"


# Helpers CEL's standard library lacks; pure functions of numbers (and a noun), nothing else is callable from a rule.
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": lambda a, b: min(a, b),
    "max": lambda a, b: max(a, b),
    "ceil": lambda a: float(math.ceil(a)),
    "floor": lambda a: float(math.floor(a)),
    "abs": lambda a: abs(a),
    "round": lambda a, n: round(float(a), int(n)),
    "plural": _plural,
}
ID = re.compile(r"^[A-Z]{2,3}\d{3}$")
NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
VALUE_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
ITEM = "item"
RESERVED = {ITEM, "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if",
            "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"}
Severity = Literal["info", "warning", "error"]
Evidence = list[str] | dict[str, Any] | str | None


TASKS = ("detect", "segment", "pose", "obb", "classify")  # Ultralytics' tasks, for a rule's `tasks`
BOUND = "bound"  # the category of the rules that name what bounds the step (presentation/verdict.py reads them)


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


class Case(BaseModel):
    """A variant of a finding: where the rule's condition and ``when`` hold, what it sets replaces the rule's."""

    model_config = ConfigDict(extra="forbid")
    when: str
    facts: list[str] = Field(default_factory=list)  # facts (or item fields) only this case reads
    optional: list[str] = Field(default_factory=list)
    severity: Severity | None = None
    message: str | None = None
    evidence: Evidence = None
    fix: FixSpec | None = None  # `fix: null` drops the rule's fix


class Form(BaseModel):
    """What a rule reads and says; a rule is its own form plus any others in ``forms``."""

    model_config = ConfigDict(extra="forbid")
    each: str | None = None
    facts: list[str]
    optional: list[str] = Field(default_factory=list)
    values: dict[str, str] = Field(default_factory=dict)
    condition: str
    message: str
    severity: Severity | None = None  # a form's own; the rule's when unset
    evidence: Evidence = None
    fix: FixSpec | None = None
    cases: list[Case] = Field(default_factory=list)


class Rule(Form):
    id: str
    name: str
    category: str
    severity: Severity
    docs: Docs
    forms: list[Form] = Field(default_factory=list)
    tasks: list[str] = Field(default_factory=list)  # the Ultralytics tasks it applies to (none listed: every task)
    source: str = ""  # the file it came from (set by the loader)

    @field_validator("tasks")
    @classmethod
    def _tasks(cls, v: list[str]) -> list[str]:
        if unknown := [t for t in v if t not in TASKS]:
            raise ValueError(f"unknown task(s) {', '.join(unknown)}: choose among {', '.join(TASKS)}")
        return v

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
    def all_forms(self) -> list[Form]:
        return [self, *self.forms]

    @property
    def severities(self) -> list[str]:
        """Every severity the rule can give, mildest first."""
        found = {f.severity or self.severity for f in self.all_forms}
        found |= {c.severity for f in self.all_forms for c in f.cases if c.severity}
        return [s for s in ("info", "warning", "error") if s in found]


@dataclass
class CompiledEvidence:
    """What a finding shows: ``list`` (facts by name), ``map`` (name -> term) or ``spread`` (one term, a mapping).

    A term is ("raw", name) for a fact, item field or value read as it is, ("cel", program), or ("const", value)."""

    kind: str
    names: list[str] = field(default_factory=list)
    terms: dict[str, tuple[str, Any]] = field(default_factory=dict)
    spread: tuple[str, Any] | None = None


@dataclass
class CompiledCase:
    case: Case
    when: Any
    evidence: CompiledEvidence | None
    fix_exprs: dict[str, Any]


@dataclass
class CompiledForm:
    form: Form
    severity: str
    values: list[tuple[str, Any]]
    condition: Any  # cel.Program
    evidence: CompiledEvidence
    fix_exprs: dict[str, Any]  # "args.workers" -> cel.Program
    cases: list[CompiledCase]


@dataclass
class Compiled:
    rule: Rule
    forms: list[CompiledForm]


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


def context(flat: dict[str, Any]) -> cel.Context:
    """A CEL evaluation context: the facts (nested) and the helper functions."""
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
ITEM_FIELD = re.compile(r"(?<![\w.])item\.([A-Za-z_]\w*)")


class _Scope:
    """What one form (or case) of a rule may read: facts, item fields, values, and their placeholder values."""

    def __init__(self, rule: Rule, form: Form, names: list[str]) -> None:
        self.rule, self.form = rule, form
        self.names: list[str] = []
        self.values: list[str] = []
        self.add(names)

    def add(self, names: list[str]) -> None:
        for n in names:
            if n.startswith(ITEM + "."):
                if not self.form.each:
                    raise RuleError(f"{self.rule.source}: rule {self.rule.id}: {n} reads an item, but the rule has "
                                    "no `each`")
                if n[len(ITEM) + 1:] not in ITEMS[self.form.each]:
                    raise RuleError(f"{self.rule.source}: rule {self.rule.id}: unknown item field {n!r} of "
                                    f"{self.form.each} (see `yolodoctor rules --facts`)")
            elif n not in CATALOGUE:
                raise RuleError(f"{self.rule.source}: rule {self.rule.id}: unknown fact {n!r} (see `yolodoctor rules "
                                "--facts`)")
            if n not in self.names:
                self.names.append(n)

    def child(self, names: list[str]) -> _Scope:
        s = _Scope(self.rule, self.form, [])
        s.names, s.values = list(self.names), list(self.values)
        s.add(names)
        return s

    @property
    def roots(self) -> set[str]:
        return {n.split(".")[0] for n in self.names} | set(self.values)

    @property
    def readable(self) -> set[str]:
        return set(self.names) | set(self.values)

    def placeholders(self) -> dict[str, Any]:
        out = {}
        each = self.form.each  # names of items are added only under an each: (add)
        for n in self.names:
            if each and n.startswith(ITEM + "."):
                out[n] = _placeholder(ITEMS[each][n[len(ITEM) + 1:]][0], None)
            else:
                out[n] = _placeholder(CATALOGUE[n][0], n)
        return out


def _placeholder(kind: str, fact: str | None) -> Any:
    if kind == "list" and fact in ITEMS:
        return [{k: PLACEHOLDER[t] for k, (t, _) in ITEMS[fact].items()}]
    return PLACEHOLDER[kind]


def _where(i: int, what: str) -> str:
    return what if i == 0 else f"forms[{i - 1}] {what}"


def _compile(expr: str, rule: Rule, scope: _Scope, where: str) -> cel.Program:
    import cel

    if not isinstance(expr, str):
        raise RuleError(f"{rule.source}: rule {rule.id}: {where} must be a CEL expression (a string)")
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
    unknown = sorted(set(refs.get("variables", [])) - scope.roots)
    unknown += sorted({f"{ITEM}.{m}" for m in ITEM_FIELD.findall(STRINGS.sub("''", expr))} - set(scope.names))
    if unknown:
        raise RuleError(f"{rule.source}: rule {rule.id}: {where} reads {', '.join(unknown)}, not among its facts")
    return prog


def _run(prog: cel.Program, ctx: cel.Context) -> Any:
    return prog.execute(ctx)


def _dry_context(scope: _Scope, rule: Rule, values: list[tuple[str, Any]]) -> cel.Context:
    flat = scope.placeholders()
    ctx = context({k: v for k, v in flat.items() if not k.startswith(ITEM + ".")})
    items = {k[len(ITEM) + 1:]: v for k, v in flat.items() if k.startswith(ITEM + ".")}
    if items:
        ctx.update({ITEM: items})
    for name, prog in values:  # a value that cannot be computed is null, here as when the rule runs
        try:
            v = _run(prog, ctx)
        except Exception:
            v = None
        ctx.update({name: v})
    return ctx


def _dry(prog: cel.Program, ctx: cel.Context, rule: Rule, where: str, want_bool: bool) -> Any:
    try:
        value = _run(prog, ctx)
    except Exception as e:
        msg = str(e).split(". ")[0]
        raise RuleError(f"{rule.source}: rule {rule.id}: {where} fails on its declared facts: {msg}") from None
    if want_bool and not isinstance(value, bool):
        raise RuleError(f"{rule.source}: rule {rule.id}: {where} must give true or false, not {type(value).__name__}")
    return value


def _term(expr: Any, rule: Rule, scope: _Scope, ctx: cel.Context, where: str) -> tuple[str, Any]:
    if not isinstance(expr, str):
        if expr is not None and not isinstance(expr, (bool, int, float)):
            raise RuleError(f"{rule.source}: rule {rule.id}: {where} must be a CEL expression or a plain value")
        return ("const", expr)
    if expr.strip() in scope.readable:
        return ("raw", expr.strip())
    prog = _compile(expr, rule, scope, where)
    _dry(prog, ctx, rule, where, want_bool=False)
    return ("cel", prog)


def _compile_evidence(ev: Evidence, rule: Rule, scope: _Scope, ctx: cel.Context, where: str) -> CompiledEvidence:
    if ev is None or isinstance(ev, list):
        names = ev if ev is not None else list(scope.names)
        bad = [n for n in names if n not in scope.readable]
        if bad:
            raise RuleError(f"{rule.source}: rule {rule.id}: {where}: {', '.join(bad)} must be among its facts")
        return CompiledEvidence("list", names=names)
    if isinstance(ev, str):
        return CompiledEvidence("spread", spread=_term(ev, rule, scope, ctx, where))
    return CompiledEvidence("map", terms={str(k): _term(v, rule, scope, ctx, f"{where} {k}") for k, v in ev.items()})


def _compile_fix(fix: FixSpec | None, rule: Rule, scope: _Scope, ctx: cel.Context, where: str) -> dict[str, Any]:
    exprs: dict[str, Any] = {}
    if not fix:
        return exprs
    items = [(f"args.{k}", v) for k, v in fix.args.items()]
    items += [(f"env.{k}", v) for k, v in fix.env.items()]
    items += [(f"torch_flags.{k}", v) for k, v in fix.torch_flags.items()]
    items += [(k, getattr(fix, k)) for k in ("seconds_saved_per_epoch", "one_off_seconds")]
    for key, value in items:
        if isinstance(value, str):
            exprs[key] = _compile(value, rule, scope, f"{where} {key}")
            _dry(exprs[key], ctx, rule, f"{where} {key}", want_bool=False)
    return exprs


def _check_message(message: str, rule: Rule, scope: _Scope, where: str) -> None:
    try:
        template.validate(message, scope.readable)
    except template.TemplateError as e:
        raise RuleError(f"{rule.source}: rule {rule.id}: {where}: {e}") from None


def _compile_form(rule: Rule, form: Form, i: int) -> CompiledForm:
    if form.each is not None and (CATALOGUE.get(form.each, ("",))[0] != "list" or form.each not in ITEMS):
        raise RuleError(f"{rule.source}: rule {rule.id}: each: {form.each!r} is not a list fact whose items the "
                        "catalogue describes (see `yolodoctor rules --facts`)")
    scope = _Scope(rule, form, [])
    scope.add(form.facts + form.optional)
    values: list[tuple[str, Any]] = []
    for name, expr in form.values.items():
        if not VALUE_NAME.match(name) or name in RESERVED or any(k.split(".")[0] == name for k in CATALOGUE):
            raise RuleError(f"{rule.source}: rule {rule.id}: value name {name!r} must be a lowercase identifier that "
                            "is not the first part of a fact's name")
        values.append((name, _compile(str(expr), rule, scope, _where(i, f"value {name}"))))
        scope.values.append(name)
    ctx = _dry_context(scope, rule, values)
    cond = _compile(form.condition, rule, scope, _where(i, "condition"))
    _dry(cond, ctx, rule, _where(i, "condition"), want_bool=True)
    _check_message(form.message, rule, scope, _where(i, "message"))
    evidence = _compile_evidence(form.evidence, rule, scope, ctx, _where(i, "evidence"))
    fix = _compile_fix(form.fix, rule, scope, ctx, _where(i, "fix"))
    cases = []
    for j, case in enumerate(form.cases):
        where = _where(i, f"cases[{j}]")
        sub = scope.child(case.facts + case.optional)
        sub_ctx = _dry_context(sub, rule, values)
        when = _compile(case.when, rule, sub, f"{where} when")
        _dry(when, sub_ctx, rule, f"{where} when", want_bool=True)
        if case.message is not None:
            _check_message(case.message, rule, sub, f"{where} message")
        ev = _compile_evidence(case.evidence, rule, sub, sub_ctx, f"{where} evidence") \
            if case.evidence is not None else None
        cases.append(CompiledCase(case, when, ev, _compile_fix(case.fix, rule, sub, sub_ctx, f"{where} fix")))
    return CompiledForm(form, form.severity or rule.severity, values, cond, evidence, fix, cases)


def compile_rule(rule: Rule) -> Compiled:
    return Compiled(rule, [_compile_form(rule, f, i) for i, f in enumerate(rule.all_forms)])


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


def builtin_dir() -> Traversable:
    """The shipped rules: the installed package yolodoctor.builtin_rules, else the source tree's rules/."""
    try:
        return importlib.resources.files("yolodoctor.builtin_rules")
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "rules"


@functools.lru_cache(maxsize=1)
def shipped_rules() -> tuple[Compiled, ...]:
    """Every shipped rule, the bound rules included, compiled once per process."""
    return tuple(load_rules(bound=True))


def builtin_rules() -> tuple[Compiled, ...]:
    """The shipped rules that make findings, compiled once per process."""
    return tuple(c for c in shipped_rules() if c.rule.category != BOUND)


def bound_rules() -> tuple[Compiled, ...]:
    """The shipped bound rules (category ``bound``, BD*): what bounds the training step, for the headline verdict.
    Their conditions exclude each other, so at most one holds for a run's facts."""
    return tuple(c for c in shipped_rules() if c.rule.category == BOUND)


def load_rules(extra_dirs: list[str | Path] | None = None, *, builtin: bool = True,
               bound: bool = False) -> list[Compiled]:
    """Built-in rules, then each folder of user rules (a user rule may not reuse a built-in id). ``bound``: the
    bound rules too (they make the verdict, not findings)."""
    sources: list[tuple[Path, str, bool]] = []  # (file, text, a user's rule)
    if builtin:
        for entry in sorted(builtin_dir().iterdir(), key=lambda p: p.name):
            if entry.name.endswith((".yaml", ".yml")):
                sources.append((Path(str(entry)), entry.read_text(encoding="utf-8"), False))
    for d in extra_dirs or []:
        d = Path(d)
        if not d.is_dir():
            raise RuleError(f"rules folder not found: {d}")
        files = sorted(list(d.glob("*.yaml")) + list(d.glob("*.yml")))
        if not files:
            raise RuleError(f"no rule files (*.yaml) in {d}")
        for p in files:
            try:
                sources.append((p, p.read_text(encoding="utf-8"), True))
            except (OSError, UnicodeDecodeError) as e:
                raise RuleError(f"{p}: cannot read: {e}") from None
    compiled: list[Compiled] = []
    seen: dict[str, str] = {}
    for path, text, user_rule in sources:
        rule = parse_rule_file(path, text)
        if rule.id in seen:
            raise RuleError(f"{path}: rule {rule.id}: id already used by {seen[rule.id]}")
        if rule.category == BOUND and user_rule:
            raise RuleError(f"{path}: rule {rule.id}: category {BOUND} is yolodoctor's own (its bound rules decide "
                            "the headline verdict); give your rule another category")
        seen[rule.id] = str(path)
        if bound or rule.category != BOUND:
            compiled.append(compile_rule(rule))
    return compiled
