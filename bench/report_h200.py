"""The figures of bench/h200_benchmark.py's results: printed, and with --write kept as a report in bench/out/reports/.

    python bench/report_h200.py [--results bench/results/h200-benchmark] [--write] [--json]

Every figure is a ratio of two measurements; the report says whether both were taken on one machine (one machine_id:
the same boot of the same host) and falls back to what there is, saying so. It works on partial results: what is missing
is listed with the command that measures it. Definitions:
  steady images/s   images / (data wait + compute) over a run's steps after 20 + workers x 4 (digest() in
                    h200_benchmark.py): compilation, the first queue fill and validation are left out
  applied / defaults   the applied run (the whole training `fix --apply` relaunched) over the defaults' whole run
  vs best swept     the applied plan's configuration profiled in the sweep (bounded, like every grid point) over the
                    fastest grid point; without it, the applied run's steady rate (different run lengths: flagged)
  100-epoch time    setup + first-steps excess (compile, queue fill) + 100 x (images per epoch / steady + validation)
  compile cost      the first steps' excess over the steady step time, compiled minus eager, cold and warm cache
  spread            |a - b| / mean of one configuration profiled twice
  loss parity       mean per-image loss over the last fifth of the optimizer steps both runs made (same count);
                    noise = the larger of 2 standard errors of those means and the same difference between the two
                    spread runs (one configuration twice)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
import h200_benchmark as hb

from yolodoctor.fixing.parity import loss_gap

GOALS = {"fix-safe": 3.5, "fix-unsafe": 4.0}
GOAL_BEST, GOAL_SPREAD, PLANNED_EPOCHS = 0.90, 0.05, 100


# ---------------------------------------------------------------------------------------------------------- helpers
def units(res: dict, part: str) -> dict[str, dict]:
    return (res.get(part) or {}).get("units", {})


def machine_id(rec: dict | None) -> str | None:
    return ((rec or {}).get("machine") or {}).get("machine_id")


def ok(rec: dict | None) -> bool:
    return bool(rec) and rec.get("status") == "complete" and bool(rec.get("steady_ips"))


def fmt(v: Any, spec: str = ".1f", none: str = "-") -> str:
    return none if v is None else format(v, spec)


def same_machine(*recs: dict | None) -> str:
    ls = {machine_id(r) for r in recs if r}
    return "one machine" if len(ls) == 1 else f"DIFFERENT machines (machines {', '.join(sorted(map(str, ls)))})"


def where(rec: dict | None) -> str:
    """The machine a record was measured on, in words: its machine_id and its GPU."""
    m = (rec or {}).get("machine") or {}
    return f"machine {m.get('machine_id') or '?'}" + (f", {m['gpu']}" if m.get("gpu") else "")


def defaults_for(res: dict, rec: dict | None) -> dict | None:
    """The defaults' whole run, from the machine that ran ``rec`` when there is one."""
    cands = [r for r in (units(res, "defaults").get("defaults"), units(res, "fix-safe").get("defaults"),
                         units(res, "fix-unsafe").get("defaults")) if ok(r)]
    return next((r for r in cands if machine_id(r) == machine_id(rec)), cands[0] if cands else None)


def best_swept(res: dict, safe: bool = False) -> dict | None:
    """The fastest grid point; ``safe``: among those a safe plan may reach (the effective batch stays nbs=64 and the
    precision stays fp16 AMP: either is a change to training, by the planner's own rule, planner.changes_training)."""
    runs = [r for n, r in units(res, "sweep").items() if not n.startswith("plan-") and ok(r)
            and (not safe or _safe(r.get("args") or {}))]
    return max(runs, key=lambda r: r["steady_ips"]) if runs else None


def _safe(args: dict) -> bool:
    from yolodoctor.fixing.planner import Change, changes_training

    before = {"batch": 16, "amp": True, "nbs": 64}  # Ultralytics' defaults, where the benchmark starts
    return not any(changes_training(Change("args", k, v, args[k], "sweep"), 64.0) for k, v in before.items()
                   if k in args)


def planned_time(run: dict, epochs: int = PLANNED_EPOCHS) -> dict[str, float] | None:
    """Seconds for a planned run of ``epochs``: one-off costs once, the steady epoch (training + validation) each."""
    if not ok(run) or not run.get("epochs"):
        return None
    ep = run["epochs"][-1]
    ipe = ep.get("images") or run["settings"].get("images_per_epoch")
    one_off = (run.get("setup_s") or 0) + max(run.get("first_steps_excess_s") or 0, 0)
    per_epoch = ipe / run["steady_ips"] + (ep.get("val_s") or 0)
    return {"one_off_s": one_off, "epoch_s": per_epoch, "total_s": one_off + epochs * per_epoch,
            "setup_s": run.get("setup_s") or 0, "excess_s": run.get("first_steps_excess_s") or 0,
            "val_s": ep.get("val_s") or 0}


def loss_parity(res: dict, defaults: dict | None, applied: dict | None) -> dict | None:
    if not (defaults and applied and defaults.get("loss_per_opt_step") and applied.get("loss_per_opt_step")):
        return None
    g = loss_gap(defaults["loss_per_opt_step"], applied["loss_per_opt_step"])
    if g is None:
        return None
    s1, s2 = units(res, "spread").get("spread-1"), units(res, "spread").get("spread-2")
    ref = loss_gap(s1.get("loss_per_opt_step") or [], s2.get("loss_per_opt_step") or []) if s1 and s2 else None
    g["ref_rel"] = abs(ref["rel"]) if ref else None
    g["band"] = max(g["two_se_rel"], g["ref_rel"] or 0.0)
    g["within"] = abs(g["rel"]) <= g["band"]
    return g


def holding(fx: dict, changes: dict[str, Any]) -> dict | None:
    """The trial verdict of the candidate whose changes are exactly ``changes`` (key -> value; the whole plan's for
    all of them)."""
    want = {f"{k}={v}" for k, v in changes.items()}
    verdicts = (fx.get("trials") or {}).get("verdicts", [])
    if want and want == {f"{c['key']}={c['after']}" for c in fx.get("plan", [])}:
        found = next((v for v in verdicts if v["candidate"] == "plan"), None)
        if found:
            return found
    return next((v for v in verdicts if v["candidate"] not in ("baseline", "plan")
                 and set(v["candidate"].split("+")) == want), None) if want else None


def candidate_words(fx: dict, name: str) -> list[str]:
    """A trial candidate's changes as key=value words: its name's, the whole plan's for "plan", none for the
    baseline."""
    if name == "baseline":
        return []
    return [f"{c['key']}={c['after']}" for c in fx.get("plan", [])] if name == "plan" else name.split("+")


def rejudge(fx: dict, reps: int = 2, max_reps: int = 4) -> dict | None:
    """The recorded trials replayed under the current rules (yolodoctor.fixing.trials.rounds: the same rounds, the same
    judge): what fix would keep from the same measurements today, and after how many trials. Candidates are rebuilt
    from their names, each judged against the candidate holding the largest part of its changes (candidates()' rule:
    what it requires; the whole plan against the baseline). Where today's rules ask for a trial that was not
    recorded, the replay stops there and judges what was recorded (``missing`` names it). None where a change alters
    training: its loss parity needs the loss curves, which the results do not keep."""
    from yolodoctor.fixing.candidates import Candidate
    from yolodoctor.fixing.judge import judge
    from yolodoctor.fixing.planner import Change
    from yolodoctor.fixing.records import TrialReport, TrialRun
    from yolodoctor.fixing.trials import rounds

    tr = fx.get("trials") or {}
    if not tr.get("verdicts") or any(c.get("safety") == "unsafe" for c in fx.get("plan", [])):
        return None
    made: dict[str, Change] = {}

    def change(word: str) -> Change:
        k, v = word.split("=", 1)
        planned = next((c for c in fx.get("plan", []) if c["key"] == k and str(c["after"]) == v), None)
        return made.setdefault(word, Change((planned or {}).get("kind", "args"), k, (planned or {}).get("before"),
                                            planned["after"] if planned else v, (planned or {}).get("reason", "")))

    names = [v["candidate"] for v in tr["verdicts"]]
    sets = {n: [change(w) for w in candidate_words(fx, n)] for n in names}
    cands = []
    for n in names:
        below = [m for m in names if m not in (n, "plan") and n != "plan" and sets[m]
                 and {id(x) for x in sets[m]} < {id(x) for x in sets[n]}]
        cands.append(Candidate(n, sets[n], against=max(below, key=lambda m: len(sets[m]), default="baseline"),
                               whole=n == "plan"))  # (a safe part is a whole too: none where nothing alters training)
    runs = {(r["candidate"], r["rep"]): TrialRun.from_dict(r) for r in tr.get("runs", []) if r["candidate"] in sets}

    class Unrecorded(Exception):
        pass
    used: list[TrialRun] = []

    def replay(c: Candidate, rep: int, run_dir: Path) -> TrialRun:
        if (c.name, rep) not in runs:
            raise Unrecorded(f"{c.name} (repeat {rep + 1})")
        used.append(runs[(c.name, rep)])
        return used[-1]
    try:
        t, missing = rounds(cands, replay, reps=reps, max_reps=max_reps), None
    except Unrecorded as e:
        t, missing = TrialReport(used, *judge(used, cands)), str(e)
    v = {x.candidate: x for x in t.verdicts}
    return {"kept": {c.key: c.after for c in t.kept}, "noise": t.noise.deviation if t.noise else None,
            "df": t.noise.df if t.noise else 0, "trials": len(t.runs), "recorded": len(runs), "missing": missing,
            "verdicts": {n: x.why for n, x in v.items()}}


def trial_compile(fx: dict) -> dict | None:
    """Compile cost as fix --verify's trials paid it, on one machine and interleaved: setup + first step of each
    compiled trial minus the median of the eager trials at the same batch and workers. A candidate's first trial
    compiles with whatever the inductor cache holds (cold for a graph not compiled before on the machine: another
    flag such as deterministic=False is another graph), its later trials find their own graph cached (warm)."""
    runs = [r for r in (fx.get("trials") or {}).get("runs", []) if r.get("phases") and r.get("status") == "complete"]
    st = (fx.get("profile") or {}).get("settings") or {}
    base = {"batch": str(st.get("batch")), "workers": str(st.get("workers"))}

    def args(r: dict) -> dict[str, str]:  # what the trial ran, over the profiled defaults
        return {**base, **dict(w.split("=", 1) for w in candidate_words(fx, r["candidate"]))}

    compiled = [r for r in runs if args(r).get("compile") not in (None, "False")]
    if not compiled:
        return None
    b, w, mode = args(compiled[0])["batch"], args(compiled[0])["workers"], args(compiled[0])["compile"]
    eager = [r["phases"]["setup_s"] + r["phases"]["first_step_s"] for r in runs
             if args(r).get("compile") in (None, "False") and (args(r)["batch"], args(r)["workers"]) == (b, w)]
    if not eager:
        return None
    ref, seen, first, again = statistics.median(eager), set(), [], []
    for r in (r for r in compiled if (args(r)["batch"], args(r)["workers"]) == (b, w)):  # in the order they ran
        x = r["phases"]["setup_s"] + r["phases"]["first_step_s"] - ref
        (again if r["candidate"] in seen else first).append(x)
        seen.add(r["candidate"])
    return {"batch": b, "workers": w, "mode": mode, "eager_s": ref, "n_eager": len(eager), "first": first,
            "again": statistics.median(again) if again else None, "n_again": len(again)}


def trial_ratio(fx: dict) -> tuple[str, float] | None:
    """The trials' own (bounded, interleaved) ratio for the set of changes that was kept, where one candidate is it."""
    base = next((v.get("median") for v in (fx.get("trials") or {}).get("verdicts", [])
                 if v["candidate"] == "baseline"), None)
    v = holding(fx, fx.get("kept") or {})
    return (v["candidate"], v["median"] / base) if v and v.get("median") and base else None


# ---------------------------------------------------------------------------------------------------------- figures
def figures(res: dict) -> dict[str, Any]:
    """Every number the report prints, as data (the test reads this)."""
    out: dict[str, Any] = {"fix": {}}
    best = best_swept(res)
    out["best_swept"] = {"name": best["config"], "ips": best["steady_ips"]} if best else None
    for part in ("fix-safe", "fix-unsafe"):
        fx = units(res, part).get("fix")
        if not fx:
            continue
        applied = fx.get("applied_run")  # the plan's run, or the original arguments' where nothing was kept
        if applied is not None:
            applied = {**applied, "machine": fx.get("machine")}
        d = defaults_for(res, fx)
        f: dict[str, Any] = {"status": fx.get("status"), "kept": fx.get("kept"), "applied": fx.get("applied"),
                             "goal": GOALS[part], "trial_ratio": trial_ratio(fx), "trial_compile": trial_compile(fx)}
        if ok(applied) and d:
            f["ratio"] = applied["steady_ips"] / d["steady_ips"]
            f["ips"] = (d["steady_ips"], applied["steady_ips"])
            f["ratio_machines"] = same_machine(applied, d)
            f["met"] = f["ratio"] >= GOALS[part]
            td, tp = planned_time(d), planned_time(applied)
            if td and tp:
                f["planned"] = {"defaults": td, "plan": tp, "saved_s": td["total_s"] - tp["total_s"]}
        sw = units(res, "sweep").get(hb.plan_unit(part))
        base = units(res, "sweep").get(hb.DEFAULTS.name)  # the defaults' own point, measured like the plan's
        if ok(sw) and ok(base):
            r = sw["steady_ips"] / base["steady_ips"]
            f["sweep_ratio"] = {"ratio": r, "ips": (base["steady_ips"], sw["steady_ips"]), "met": r >= GOALS[part],
                                "machines": same_machine(sw, base), "where": where(sw)}
        for key, top in (("vs_best", best), ("vs_best_safe", best_swept(res, safe=True) if part == "fix-safe"
                                             else None)):
            if top and ok(sw):
                r = sw["steady_ips"] / top["steady_ips"]
                f[key] = {"ratio": r, "how": "sweep (bounded, one run each, like the grid)",
                          "machines": same_machine(sw, top), "met": r >= GOAL_BEST, "best": top["config"]}
            elif top and ok(applied):
                r = applied["steady_ips"] / top["steady_ips"]
                f[key] = {"ratio": r, "how": "applied whole run vs bounded grid run (plan not yet in the sweep)",
                          "machines": same_machine(applied, top), "met": r >= GOAL_BEST, "best": top["config"]}
        f["loss"] = loss_parity(res, d, applied)
        out["fix"][part] = f
    out["spreads"] = []
    for config, s in spread_pairs(res).items():
        a, b = s[0]["steady_ips"], s[1]["steady_ips"]
        sp = {"config": config, "values": [a, b], "spread": abs(a - b) / ((a + b) / 2),
              "machines": same_machine(*s), "met": abs(a - b) / ((a + b) / 2) <= GOAL_SPREAD}
        out["spreads"].append(sp)
        if config == hb.SPREAD_DEFAULT:
            out["spread"] = sp
    c = units(res, "compile").get("compile")
    if c:
        out["compile"] = {k: c.get(k) for k in ("config", "cost_cold_s", "cost_warm_s", "compile_mapped_off")}
        out["compile"]["where"] = where(c)
    return out


def spread_pairs(res: dict) -> dict[str, tuple[dict, dict]]:
    """config -> its two complete runs, for every configuration the spread part ran twice."""
    out = {}
    for c in hb.GRID:
        pair = [units(res, "spread").get(n) for n in hb.spread_units(c.name)]
        if all(ok(r) and r.get("config", c.name) == c.name for r in pair):  # a record names its configuration
            out[c.name] = (pair[0], pair[1])
    return out


def spread_why(res: dict) -> list[str]:
    """Per run of the spread pair: where the step time went (host clock vs CUDA events), data wait, CPU, GPU."""
    out = []
    names = hb.spread_units(hb.SPREAD_DEFAULT)
    for i, name in zip((1, 2), names, strict=False):
        r = units(res, "spread").get(name) or {}
        fa = r.get("facts") or {}
        out.append(f"run {i}: {fmt(r.get('steady_ips'), '.1f')} img/s, median step "
                   f"{fmt(1000 * r['step_s_median'] if r.get('step_s_median') else None, '.0f')} ms (GPU time by CUDA "
                   f"events {fmt(r.get('gpu_ms_median'), '.0f')} ms), data wait {fmt(r.get('wait_share'), '.1%')}, "
                   f"training thread {fmt(fa.get('cpu.train_thread_pct'), '.0f')}% of a core, loader workers "
                   f"{fmt(fa.get('cpu.train_workers_pct'), '.0f')}%, CPU saturated "
                   f"{fmt(fa.get('cpu.saturated_share'), '.0%')} of the time, NVML GPU util "
                   f"{fmt(fa.get('gpu.util_mean'), '.0f')}%, throttled {fmt(fa.get('gpu.throttled_share'), '.0%')}"
                   + host_words(r))
        if pyspy_words(r):
            out.append(f"run {i}, " + pyspy_words(r))
    r1, r2 = (units(res, "spread").get(n) or {} for n in names)
    a, b = host_speed(r1), host_speed(r2)
    if a and b and r1.get("steady_ips") and r2.get("steady_ips"):
        out.append(f"run 2 / run 1: training rate x{r2['steady_ips'] / r1['steady_ips']:.2f}; the host probe's speed "
                   + ", ".join(f"{k} x{a[k] / b[k]:.2f}" for k in ("Python", "JPEG decode") if a.get(k) and b.get(k))
                   + " (a host probe that moved with the rate points at the machine, not at the run)")
    return out


def pyspy_words(rec: dict, top: int = 4) -> str:
    """bench/pyspy_probe.py's summary of a run's training thread, in a sentence ('' where it was not sampled)."""
    ps = rec.get("pyspy") or {}
    if not ps.get("samples"):
        return ""
    where = "; ".join(f"{x['where']} {x['share']:.0%} (on a CPU {min(x['on_cpu'], 1):.0%}, GIL {min(x['gil'], 1):.0%})"
                      for x in ps["leaves"][:top])
    others = ", ".join(f"{o['thread']} GIL {o['gil']:.0%}" for o in ps.get("other_threads", [])[:3] if o.get("gil"))
    cut = ", the run ended inside the window" if ps.get("truncated") else ""
    return (f"py-spy on the training thread ({ps['samples']} samples{cut}): on a CPU {fmt(ps.get('on_cpu'), '.0%')} "
            f"and holding the GIL {fmt(ps.get('gil'), '.0%')} of its wall time; where: {where}"
            + (f"; other threads holding the GIL: {others}" if others else ""))


def host_speed(rec: dict | None) -> dict[str, float] | None:
    """The host probe's mean time over a unit (before and after), by workload; None where it was not taken."""
    hp = (rec or {}).get("host_probe") or {}
    pts = [p for p in (hp.get("before"), hp.get("after")) if p and "error" not in p]
    out = {}
    for name, key in (("Python", "python_ms"), ("JPEG decode", "jpeg_decode_ms")):
        v = [p[key] for p in pts if isinstance(p.get(key), (int, float)) and p[key] > 0]
        if v:
            out[name] = statistics.mean(v)
    return out or None


def host_words(rec: dict) -> str:
    hp = rec.get("host_probe") or {}
    b, a = hp.get("before") or {}, hp.get("after") or {}
    if not b.get("python_ms") or not a.get("python_ms"):
        return ""
    return (f", host probe before/after: Python loop {b['python_ms']:.1f}/{a['python_ms']:.1f} ms, JPEG decode "
            f"{fmt(b.get('jpeg_decode_ms'), '.2f')}/{fmt(a.get('jpeg_decode_ms'), '.2f')} ms, memcpy "
            f"{fmt(b.get('memcpy_gbps'))}/{fmt(a.get('memcpy_gbps'))} GB/s")


def missing(res: dict) -> list[str]:
    scale = next((d.get("scale") for d in res.values()), None) or {}
    tiny = bool(scale.get("tiny"))
    want = {"dataset": ["dataset"], "defaults": ["defaults"], "fix-safe": ["fix"], "fix-unsafe": ["fix"],
            "loader": list(hb.loader_units(tiny)),
            "sweep": [c.name for c in hb.grid(tiny)] + [f"plan-{p}" for p in ("safe", "unsafe")
                                                      if units(res, f"fix-{p}").get("fix", {}).get("kept")],
            "spread": ["spread-1", "spread-2"], "compile": ["compile"],
            "workers": [n for n, _ in hb.workers_units(tiny)]}
    out = []
    for part, names in want.items():
        have = units(res, part)
        gone = [n for n in names if n not in have]
        if gone:
            out.append(f"{part}: {', '.join(gone)} (`bash bench/h200_benchmark.sh {part}`)")
    for part in ("fix-safe", "fix-unsafe"):  # applied / defaults is a ratio within one machine only with these
        fix = units(res, part).get("fix")
        # fix-unsafe's trials take about 25 minutes at two repeats (fix's default of 4 takes longer)
        reps, why = (" --max-reps 2", ": two repeats, about 25 minutes") if part == "fix-unsafe" else \
            ("", "")
        if fix and machine_id(fix) and machine_id(defaults_for(res, fix)) != machine_id(fix):
            out.append(f"{part}: a defaults whole run on the fix's machine (machine {machine_id(fix)}): applied / "
                       f"defaults compares two machines until the part runs again on one "
                       f"(`bash bench/h200_benchmark.sh {part} --redo {part}/fix{reps}`{why})")
    return out


# ---------------------------------------------------------------------------------------------------------- text
def machines(res: dict) -> str:
    seen: dict[str, dict] = {}
    for doc in res.values():
        for r in doc["units"].values():
            m = r.get("machine") or {}
            e = seen.setdefault(m.get("machine_id"), {"m": m, "dates": [], "torch": None})
            e["dates"].append(r.get("finished") or "")
            e["torch"] = e["torch"] or (r.get("settings") or {}).get("torch")
    return "\n".join(f"- machine {k}: {v['m'].get('gpu') or 'no GPU'} ({v['m'].get('gpu_uuid') or '-'}), "
                     f"{v['m'].get('describe')}, torch {v['torch'] or '?'}, Ultralytics {v['m'].get('ultralytics')}; "
                     f"{min(v['dates'])} to {max(v['dates'])}" for k, v in seen.items())


def sweep_table(res: dict) -> list[str]:
    rows = ["| config | arguments | steady img/s | profile's img/s | window | data wait | GPU util | compile active | "
            "precision | cache | setup s | host probe ms | machine |", "|" + "---|" * 13]
    recs = sorted(units(res, "sweep").values(), key=lambda r: -(r.get("steady_ips") or 0))
    for r in recs:
        st, fa = r.get("settings") or {}, r.get("facts") or {}
        failed = "" if r.get("status") == "complete" else f" {r.get('status')}: {r.get('reason')} |"
        rows.append(f"| {r.get('config')} | {' '.join(hb.words(r.get('args') or {}))} | {fmt(r.get('steady_ips'))} | "
                    f"{fmt(r.get('summary_ips'))} | {'ok' if r.get('window_valid') else 'short'} | "
                    f"{fmt(r.get('wait_share'), '.0%')} | {fmt(fa.get('gpu.util_mean'), '.0f')} | "
                    f"{st.get('compile_active')} | {st.get('precision')} | {st.get('cache')} | "
                    f"{fmt(r.get('setup_s'))} | {probe_cell(r)} | {machine_id(r)} |" + failed)
    if not recs:
        return ["(no sweep results)"]
    ms = [p["python_ms"] for r in recs for p in ((r.get("host_probe") or {}).get(k) for k in ("before", "after"))
          if p and p.get("python_ms")]
    if ms:
        rows += ["", f"Host probe: the time of a fixed single-thread Python loop just before / after each run "
                 f"(yolodoctor/profiling/hostprobe.py), {min(ms):.0f} to {max(ms):.0f} ms over these runs. "
                 "A host-bound configuration (launch-bound: the GPU waits for the host's kernel launches, finding "
                 "LA201) runs at the host's speed, so compare two rows only where their probes agree, or through "
                 "interleaved repeats (`fix --verify`)."]
    return rows


def probe_cell(rec: dict) -> str:
    hp = rec.get("host_probe") or {}
    b, a = (hp.get(k) or {} for k in ("before", "after"))
    return f"{b['python_ms']:.0f}/{a['python_ms']:.0f}" if b.get("python_ms") and a.get("python_ms") else "-"


def workers_table(res: dict) -> list[str]:
    """The workers part: per worker count, the rates of its rounds, their data wait, and each run's step compute
    time (data wait left out) as median (p10-p90)."""
    rounds = range(1, hb.WORKERS_ROUNDS + 1)
    rows = ["| workers | steady img/s per round | data wait | "
            + " | ".join(f"step compute, run {i}" for i in rounds) + " | machine |", "|---" * (len(rounds) + 4) + "|"]
    by: dict[Any, list[dict]] = {}
    for r in units(res, "workers").values():
        by.setdefault(r.get("workers"), []).append(r)

    def ms(r: dict) -> str:
        c = r.get("compute_s")
        return f"{c[1] * 1e3:.0f} ({c[0] * 1e3:.0f}-{c[2] * 1e3:.0f}) ms" if c else "-"
    for w in sorted(by, key=lambda x: (x is None, x)):
        rs = by[w]
        rows.append(f"| {w} | {', '.join(fmt(r.get('steady_ips')) for r in rs)} | "
                    f"{', '.join(fmt(r.get('wait_share'), '.0%') for r in rs)} | "
                    + " | ".join(ms(r) for r in (rs + [{}] * len(rounds))[:len(rounds)])
                    + f" | {', '.join(sorted({str(machine_id(r)) for r in rs}))} |")
    return rows


def loader_table(res: dict) -> list[str]:
    recs = units(res, "loader")
    if not recs:
        return ["(no loader results)"]
    rows = ["| unit | workers | batch | cache | images/s alone | valid | first batch s | machine |", "|" + "---|" * 8]
    for n, r in recs.items():
        rows.append(f"| {n} | {r.get('workers')} | {r.get('batch')} | {(r.get('args') or {}).get('cache', False)} | "
                    f"{fmt(r.get('images_per_s'))} | {r.get('valid')} | {fmt(r.get('first_batch_s'), '.2f')} | "
                    f"{machine_id(r)} |")
    return rows


def applied_words(ap: dict) -> str:
    """What fix applied, as key=value words (its record names the applied run 'plan' even where only part of the
    plan was kept, and the whole plan is a candidate of that name too)."""
    if ap.get("rolled_back"):
        return f"nothing (rolled back: {ap.get('rollback_reason')})"
    words = [f"{k}={v}" for k, v in {**(ap.get("args") or {}), **(ap.get("other") or {})}.items()]
    return " ".join(words) or "nothing"


def trial_tables(fx: dict) -> list[str]:
    """The plan, the findings and one row per candidate. Kept means applied: a whole set that beat the baseline but
    was not applied whole (recorded as kept before df39bdc) says no."""
    rows = ["Plan: " + ("; ".join(f"{c['key']} {c['before']!r} -> {c['after']!r} ({c['safety']}, {c['reason']})"
                                  for c in fx.get("plan", [])) or "no change"),
            f"Findings on the defaults' profile: {', '.join(fx.get('findings', [])) or 'none'}.", "",
            "| candidate | images/s per repeat | median | vs baseline | kept | why |", "|---|---|---|---|---|---|"]
    tr = fx.get("trials") or {}
    for v in tr.get("verdicts", []):
        reps = [fmt(r.get("images_per_s")) + (f" ({r['host_ms']:.0f} ms)" if r.get("host_ms") else "")
                for r in tr.get("runs", []) if r["candidate"] == v["candidate"]]
        rows.append(f"| {v['candidate']} | {' '.join(reps)} | {fmt(v.get('median'))} | {fmt(v.get('gain'), '+.1%')} | "
                    f"{'yes' if v.get('kept') and 'not applied' not in v.get('why', '') else 'no'} | {v.get('why')} |")
    ms = [r["host_ms"] for r in tr.get("runs", []) if r.get("host_ms")]
    if ms:
        rows.append(f"\nIn brackets: the host probe's Python loop just before each trial ({min(ms):.0f} to "
                    f"{max(ms):.0f} ms, spread {fmt(tr.get('host_spread'), '.0%')}).")
    eager = [r["phases"] for r in tr.get("runs", []) if r.get("phases") and r.get("status") == "complete"
             and not any(w.startswith("compile=") and w != "compile=False"
                         for w in candidate_words(fx, r["candidate"]))]
    if eager:
        med = {k: statistics.median(ph[k] for ph in eager) for k in eager[0]}
        rows.append(f"\nWhere an eager trial's time went (median of {len(eager)}, from their events): Python start "
                    f"and imports until the trainer begins {med['start_s']:.1f} s, setup {med['setup_s']:.1f} s, "
                    f"first step (first batch, CUDA and cuDNN start) {med['first_step_s']:.1f} s, the other steps "
                    f"{med['steps_s']:.1f} s, to the run's end {med['end_s']:.1f} s; {med['total_s']:.1f} s in all.")
    ap = fx.get("applied") or {}
    rows.append(f"\nApplied ({ap.get('status')}): {applied_words(ap)}.")
    return rows


def explain(res: dict, part: str, f: dict) -> list[str]:
    """The measurements behind a missed goal: loader capacity vs consumption, GPU, compile, and what differs from
    the best configuration."""
    fx = units(res, part)["fix"]
    run = fx.get("applied_run") or {}
    st, fa = run.get("settings") or {}, run.get("facts") or {}
    out = []
    w, b, cache = st.get("workers"), st.get("batch"), st.get("cache")
    # the applied run measured its own loader (its workers, batch and cache) after its steps; else the loader part
    cap, src = fa.get("loader.capacity_images_per_s"), "measured by the applied run after its steps"
    if cap is None:
        match = next((r for r in units(res, "loader").values()
                      if r.get("workers") == w and r.get("batch") == b and bool((r.get("args") or {}).get("cache")) ==
                      bool(cache) and r.get("images_per_s")), None)
        cap, src = (match or {}).get("images_per_s"), f"loader part, machine {machine_id(match)}"
    ips = run.get("steady_ips")
    if ips and cap:
        out.append(f"loader: the applied run consumed {ips:.0f} img/s; the loader alone delivers {cap:.0f} img/s "
                   f"with {w} workers at batch {b}{' (cache)' if cache else ''} ({src}): "
                   + ("the loader is the limit" if ips >= 0.85 * cap else "headroom left, the GPU side is the limit"))
    out.append(f"GPU: utilisation {fmt(fa.get('gpu.util_mean'), '.0f')}% (NVML, device-wide), data wait "
               f"{fmt(run.get('wait_share'), '.0%')}, median step "
               f"{fmt((run.get('step_s_median') or 0) * 1e3 or None, '.0f')} ms of which the GPU-timed span (CUDA "
               f"events around the step) {fmt(run.get('gpu_ms_median'), '.0f')} "
               f"ms, {fmt(fa.get('trace.syncs_per_step'), '.0f')} host-device syncs per step (its trace)")
    out.append(f"CPU: training thread {fmt(fa.get('cpu.train_thread_pct'), '.0f')}% of a core, loader workers "
               f"{fmt(fa.get('cpu.train_workers_pct'), '.0f')}%, the whole machine "
               f"{fmt(fa.get('cpu.total_pct'), '.0f')}% of its {((fx.get('machine') or {}).get('cores')) or '?'} "
               "cores, saturated "
               f"{fmt(fa.get('cpu.saturated_share'), '.0%')} of the time")
    cp = units(res, "compile").get("compile") or {}
    out.append(f"compile: asked {st.get('compile_requested')!r}, active {st.get('compile_active')}; first-steps "
               f"excess {fmt(run.get('first_steps_excess_s'))} s (compile part: cold {fmt(cp.get('cost_cold_s'))} s, "
               f"warm {fmt(cp.get('cost_warm_s'))} s"
               + (f", {where(cp)}" if cp and machine_id(cp) != machine_id(fx) else "") + ")")
    tr = fx.get("trials") or {}
    kept = fx.get("kept") or {}
    verdicts = {v["candidate"]: v for v in tr.get("verdicts", [])}
    dropped = [(c, v) for c in fx.get("plan", []) if c["key"] not in kept or kept[c["key"]] != c["after"]
               for v in [next((v for n, v in verdicts.items() if n.endswith(f"{c['key']}={c['after']}")), None)] if v]
    if dropped:
        out.append("trials: not kept " + "; ".join(f"{c['key']}={c['after']!r} ({v['candidate']}: {v['why']})"
                                                    for c, v in dropped))
        whole, mine = verdicts.get("plan"), holding(fx, kept)
        if whole and mine and whole.get("median") and mine.get("median"):
            out.append(f"trials: the whole plan ran {whole['median']:.0f} img/s (median of "
                       f"{fmt(whole.get('runs'), 'd')}), what was kept ({mine['candidate']}) {mine['median']:.0f} "
                       f"(of {fmt(mine.get('runs'), 'd')}): {whole['median'] / mine['median'] - 1:+.0%}")
    again = rejudge(fx, reps=(next(iter(res.values()), {}).get("scale") or {}).get("reps") or 2)
    if again and (again["kept"] != kept or again["trials"] != again["recorded"]):
        whole = again["verdicts"].get("plan", "")
        out.append(f"trials replayed under the current rules: fix would keep "
                   f"{' '.join(f'{k}={v}' for k, v in again['kept'].items()) or 'nothing'} after "
                   f"{again['trials']} of the {again['recorded']} recorded trials"
                   + (f" ({whole.split('; ')[-1]})" if "whole" in whole else "")
                   + (f"; it would have run {again['missing']}, not recorded" if again["missing"] else "")
                   + f" (pooled run-to-run deviation {fmt(again['noise'], '.1%')}, {again['df']} degrees of freedom)")
    best = best_swept(res)
    if best:
        plan_args = {**hb.DEFAULTS.args(), **(fx.get("applied") or {}).get("args", {})}
        # the run's length (long_enough's epochs, warmup_epochs, val) is how the point was measured, not a knob
        diff = {k: v for k, v in (best.get("args") or {}).items()
                if plan_args.get(k, False) != v and k not in ("epochs", "warmup_epochs", "val")}
        own = units(res, "sweep").get(hb.plan_unit(part))
        if ok(own) and machine_id(own) == machine_id(best):
            mine = (f" ({where(best)}; the plan's own point there {own['steady_ips']:.0f} img/s, "
                    f"{own['steady_ips'] / best['steady_ips']:.0%} of it)")
        else:
            mine = f" ({where(best)})" if machine_id(best) != machine_id(fx) else ""
        out.append(f"best swept {best['config']} ({best['steady_ips']:.0f} img/s){mine} differs from the plan in "
                   f"{' '.join(hb.words(diff)) or 'nothing planned'}; the plan dropped: "
                   + ("; ".join(f"{x.get('key')}: {x.get('reason')}" for x in fx.get("dropped", [])) or "nothing"))
    return out


def _fix_rows(part: str, x: dict) -> list[str]:
    """The goal table's rows of one fix part."""
    L: list[str] = []
    ap = x.get("applied") or {}
    L.append(f"| {part}: applied / defaults, steady img/s | >= {x['goal']}x | {fmt(x.get('ratio'), '.2f')}x"
             + (f" ({x['ips'][0]:.1f} -> {x['ips'][1]:.1f})" if x.get("ips") else "")
             + f" | {_yn(x.get('met'), x.get('ratio_machines'))} | whole runs, "
             f"{x.get('ratio_machines', 'not measured')}; applied: {applied_words(ap)}"
             + (f"; trials ({x['trial_ratio'][0]} vs baseline, bounded): {x['trial_ratio'][1]:.2f}x"
                if x.get("trial_ratio") else "") + " |")
    for key, what in (("vs_best", "best swept"), ("vs_best_safe", "best safe swept")):
        vb = x.get(key) or {}
        if key == "vs_best" or vb:
            L.append(f"| {part}: plan / {what}{' (' + vb['best'] + ')' if vb.get('best') else ''} | >= "
                     f"{GOAL_BEST:.0%} | {fmt(vb.get('ratio'), '.0%')} | "
                     f"{_yn(vb.get('met'), vb.get('machines'))} | "
                     f"{', '.join(w for w in (vb.get('how', 'not measured'), vb.get('machines')) if w)} |")
    sr = x.get("sweep_ratio")
    if sr:
        L.append(f"| {part}: plan / defaults in the sweep, steady img/s | >= {x['goal']}x | {sr['ratio']:.2f}x "
                 f"({sr['ips'][0]:.1f} -> {sr['ips'][1]:.1f}) | {_yn(sr['met'], sr['machines'])} | bounded, one "
                 f"run each: {hb.plan_unit(part)} over {hb.DEFAULTS.name}, {sr['machines']} ({sr['where']}) |")
    p = x.get("planned")
    if p:
        L.append(f"| {part}: time saved over {PLANNED_EPOCHS} epochs | - | {p['saved_s'] / 3600:.2f} h "
                 f"({p['saved_s']:.0f} s) | - | defaults {p['defaults']['total_s'] / 3600:.2f} h vs plan "
                 f"{p['plan']['total_s'] / 3600:.2f} h; one-off {p['defaults']['one_off_s']:.0f} s vs "
                 f"{p['plan']['one_off_s']:.0f} s (setup incl. cache {p['plan']['setup_s']:.0f} s, first steps "
                 f"incl. compile {p['plan']['excess_s']:.0f} s); epoch {p['defaults']['epoch_s']:.0f} s vs "
                 f"{p['plan']['epoch_s']:.0f} s |")
    tc = x.get("trial_compile")
    if tc:
        L.append(f"| {part}: compile cost in its trials (batch {tc['batch']}, workers {tc['workers']}, "
                 f"{tc['mode']}) | - | first trial of "
                 f"each compiled candidate {', '.join(f'{v:+.0f} s' for v in tc['first'])}; later trials "
                 f"{fmt(tc['again'], '+.0f')} s (median of {tc['n_again']}) | - | setup + first step of a "
                 f"compiled trial minus the eager trials' median at that batch and workers ({tc['eager_s']:.1f} s, "
                 f"{tc['n_eager']} trials); one machine, interleaved |")
    lo = x.get("loss")
    if lo:
        L.append(f"| {part}: loss vs defaults at {lo['opt_steps']} optimizer steps | within noise"
                 f"{' (safe)' if part == 'fix-safe' else ''} | {lo['rel']:+.1%} ({lo['a']:.4f} -> {lo['b']:.4f}) "
                 f"| {_yn(lo['within']) if part == 'fix-safe' else ('within' if lo['within'] else 'outside')} "
                 f"| noise band {lo['band']:.1%} (2 s.e. {lo['two_se_rel']:.1%}, two runs of one config "
                 f"{fmt(lo['ref_rel'], '.1%')}), mean of the last {lo['window']} optimizer steps |")
    return L


def _other_rows(f: dict) -> list[str]:
    """The goal table's rows beyond the fix parts: the spreads, compile's cost, the best swept configuration."""
    L: list[str] = []
    for x in f.get("spreads", []):
        L.append(f"| spread of {x['config']} run twice | <= {GOAL_SPREAD:.0%} | {x['spread']:.1%} "
                 f"({x['values'][0]:.1f}, {x['values'][1]:.1f} img/s) | {_yn(x['met'])} | bounded, "
                 f"{x['machines']} |")
    c = f.get("compile")
    if c:
        L.append(f"| compile cost, {c['config']} | - | cold {fmt(c['cost_cold_s'], '.0f')} s, warm "
                 f"{fmt(c['cost_warm_s'], '.0f')} s | - | first steps' excess over eager, one machine ({c['where']})"
                 + ("; compile mapped off at this scale" if c.get("compile_mapped_off") else "") + " |")
    if f.get("best_swept"):
        L.append(f"| best swept configuration | - | {f['best_swept']['name']}: {f['best_swept']['ips']:.1f} img/s "
                 "| - | bounded profile |")
    return L


def _why_missed(res: dict, f: dict) -> list[str]:
    L: list[str] = []
    for part, x in f["fix"].items():
        missed = [x.get("met"), (x.get("vs_best") or {}).get("met")] + ([x["loss"]["within"]] if part == "fix-safe"
                                                                         and x.get("loss") else [])
        if False in missed:
            L += ["", f"Why {part} missed a goal (measured):"] + [f"- {e}" for e in explain(res, part, x)]
    sp = f.get("spread")
    if sp and not sp["met"]:
        L += ["", "Why the spread goal was missed (measured, the two runs):"] + [f"- {e}" for e in spread_why(res)]
    return L


def _tables(res: dict) -> list[str]:
    """The trials, the sweep, the loader, the workers, what is missing and how to re-run it."""
    L: list[str] = []
    for part in ("fix-safe", "fix-unsafe"):
        fx = units(res, part).get("fix")
        if fx:
            L += ["", f"### Trials of {part} (`fix --verify`, interleaved, machine {machine_id(fx)})", "",
                  *trial_tables(fx)]
    L += ["", "### Sweep (bounded `profile --no-trace`, steady images/s, fastest first)", "", *sweep_table(res)]
    L += ["", "### The loader alone (Ultralytics' train loader, no model, mosaic on)", "", *loader_table(res)]
    if units(res, "workers"):
        L += ["", "### Loader workers and the host's work per step (batch 64, reduce-overhead, bounded)", "",
              "Step compute: the step's own time with the data wait left out, median (p10-p90). If it grows with "
              "the worker count, the workers' CPU load slows the host threads that launch the kernels.", ""]
        L += workers_table(res)
    gone = missing(res)
    L += ["", "### Missing", ""] + ([f"- {m}" for m in gone] or ["Nothing: every part is recorded."])
    L += ["", "### Re-running it", "", "```", hb.__doc__[hb.__doc__.index("Commands, one per part"):].strip(),
          "python bench/report_h200.py --write", "```"]
    return L


def body(res: dict) -> str:
    if not res:
        return "No results yet: run `bash bench/h200_benchmark.sh dataset defaults` on the GPU machine first."
    scale = next(iter(res.values())).get("scale", {})
    f = figures(res)
    L = ["## How close `fix --verify --apply` gets to the best configuration", ""]
    if scale.get("tiny"):
        L += ["**TINY CPU SCALE: these figures exercise the pipeline; they are not the H200's.**", ""]
    L += [f"Scale: {scale.get('images')} train / {scale.get('val_images')} val images of {scale.get('size')} "
          f"(synthetic JPEG), {scale.get('model')}, imgsz {scale.get('imgsz')}, epochs={scale.get('epochs')} "
          f"close_mosaic=0 (mosaic on, no warm-up), fix --reps {scale.get('reps')}; a bounded run whose steady window "
          "does not fit in one epoch (batch 128 with 16 workers, and fix-unsafe's trials) runs 2 epochs with "
          f"warmup_epochs=0 val=False (its arguments say so). Report made {common.today()}. Machines:",
          machines(res), "", "| figure | goal | measured | met | how |", "|---|---|---|---|---|"]
    for part, x in f["fix"].items():
        L += _fix_rows(part, x)
    L += _other_rows(f)
    L += _why_missed(res, f)
    L += _tables(res)
    return "\n".join(L)


def _yn(v: bool | None, machines: str | None = None) -> str:
    """A goal's verdict; one drawn from two machines says so (their speeds differ by more than some goals' margin)."""
    across = " (across machines)" if v is not None and (machines or "").startswith("DIFFERENT") else ""
    return ("-" if v is None else ("yes" if v else "**no**")) + across


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", type=Path, default=hb.RESULTS)
    ap.add_argument("--write", action="store_true", help="also write the report to bench/out/reports/h200-benchmark.md")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON instead")
    a = ap.parse_args(argv)
    res = hb.load_results(a.results)
    if a.json:
        print(json.dumps(figures(res), indent=1, default=str))
        return 0
    text = body(res)
    print(text)
    if a.write:
        if any(d.get("scale", {}).get("tiny") for d in res.values()):
            print("not written: tiny-scale results are not a report", file=sys.stderr)
            return 2
        print(f"written: {common.write_report('h200-benchmark', text)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
