#!/usr/bin/env python3
"""Merges the Google Benchmark JSON files of the bench processes into one.

Each bench process (one implementation at one thread count, one repeat; see
bench/README.md) writes its own JSON. This script
  - folds each benchmark's aggregates (median, mean, min, p10, p90) into one
    entry named <workload>/<impl>/<size>/t<threads>, whose real_time is the
    minimum over the interleaved repeats of the median call time;
  - checks that every implementation's checksum of a workload and size agrees
    with the reference's (nimble_reference where it ran): |Δchecksum| and
    |Δabssum| at most `tolerance` · abssum;
  - keeps the micro programs' rows (runtime_bench, vm_bench, elemwise_bench,
    jit_bench) with every counter, under the names they were registered with;
  - writes the merged file (Google Benchmark's JSON layout: "context" and
    "benchmarks") and prints the markdown table of the README, with ELEMWISE
    and JIT/compile under it when they ran.

    merge_results.py [--out FILE] [--tolerance T] RAW.json ...

Exit status: 0, or 1 when a checksum disagrees or a benchmark failed.
Standard library only.
"""
import argparse
import datetime
import json
import math
import re
import sys

WORKLOAD_ORDER = ["W1", "W2", "W3", "CHAIN1000", "GEMM", "SGEMM"]
NIMBLE_IMPLS = ["nimble", "nimble_cuda", "nimble_deep", "nimble_prepacked", "nimble_reference"]
PEER_IMPLS = ["libtorch_fused", "libtorch_cell_loop", "libtorch_recursive", "libtorch",
              "handwritten", "openblas"]
IMPL_ORDER = NIMBLE_IMPLS + PEER_IMPLS
# <workload>/<impl>/<size>/t<threads>; the size is a number, or a shape such
# as GEMM's "200x768x3072".
NAME = re.compile(r"^([^/]+)/([^/]+)/(\d+(?:x\d+)*)/t(\d+)$")


def parse_size(text):
    """A plain size as an int, a shape ("MxKxN") as its text."""
    return int(text) if text.isdigit() else text


def size_key(size):
    """Plain sizes first, by value; then shapes, by their dims."""
    if isinstance(size, int):
        return (0, size, ())
    return (1, 0, tuple(int(d) for d in size.split("x")))
ELEMWISE = re.compile(r"^ELEMWISE/([^/]+)/([^/]+)/(\d+)$")  # elemwise_bench: impl, op, n
ELEMWISE_OPS = ["add", "sigmoid", "gelu"]
# What Google Benchmark appends to a name: /iterations:1/repeats:20/manual_time
SUFFIX = re.compile(r"(/(iterations|repeats|min_time|threads):[^/]*|/manual_time|/real_time)+$")
# Keys of Google Benchmark's JSON that are not user counters; every other
# number of a benchmark is one (the workloads' checksum, abssum, gflops, ...;
# the micro programs' ns_per_instruction, elements_per_second, ms_median, ...).
NOT_COUNTERS = {"name", "family_index", "per_family_instance_index", "run_name", "run_type",
                "repetitions", "repetition_index", "threads", "iterations", "real_time",
                "cpu_time", "time_unit", "aggregate_name", "aggregate_unit", "label",
                "error_occurred", "error_message", "big_o", "rms", "complexity_n"}
# Context keys that describe one process (the rest describe the machine).
PROCESS_KEYS = ["impls", "threads", "mode", "date", "load_avg", "blas_library", "blas_config",
                "blas_threading", "blas_num_threads", "openmp_library", "tbb_library",
                "env_OMP_NUM_THREADS", "env_OPENBLAS_NUM_THREADS", "env_LD_LIBRARY_PATH",
                "nimble_engine", "nimble_version", "torch_version", "torch_parallel_info",
                "eigen_version", "eigen_threads", "eigen_simd"]
MACHINE_KEYS = ["host_name", "num_cpus", "mhz_per_cpu", "cpu_scaling_enabled", "caches",
                "library_build_type", "cpu_model"]


def base_name(name):
    return SUFFIX.sub("", name)


def counters_of(b):
    return {k: v for k, v in b.items()
            if k not in NOT_COUNTERS and isinstance(v, (int, float)) and not isinstance(v, bool)}


def to_ms(value, unit):
    return value * {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[unit]


def read_runs(path, repeat):
    """One record per benchmark of one process: its statistics and counters."""
    with open(path) as f:
        data = json.load(f)
    runs, failures = {}, []
    for b in data.get("benchmarks", []):
        name = base_name(b.get("run_name", b["name"]))
        if b.get("error_occurred"):
            failures.append(f"{name}: {b.get('error_message', 'failed')}")
            continue
        r = runs.setdefault(name, {"name": name, "repeat": repeat, "stats": {}, "counters": {},
                                   "repetitions": b.get("repetitions", 1),
                                   "iterations": b.get("iterations", 1), "file": path})
        ms = to_ms(b["real_time"], b.get("time_unit", "ns"))
        if b.get("run_type") == "aggregate":
            stat = b["aggregate_name"]
            r["stats"][stat] = ms
            if stat == "median":
                r["counters"] = counters_of(b)
                r["cpu_ms"] = to_ms(b["cpu_time"], b.get("time_unit", "ns"))
        else:  # a single timed call
            r["stats"].update(median=ms, mean=ms, min=ms, p10=ms, p90=ms)
            r["counters"] = counters_of(b)
            r["cpu_ms"] = to_ms(b["cpu_time"], b.get("time_unit", "ns"))
    return data.get("context", {}), list(runs.values()), failures


def merge(inputs):
    """inputs: [(path, repeat)]. Returns (merged JSON, per-repeat runs, failures)."""
    contexts, all_runs, failures = [], [], []
    for path, repeat in inputs:
        context, runs, fails = read_runs(path, repeat)
        contexts.append((path, repeat, context))
        all_runs += runs
        failures += [f"{path}: {f}" for f in fails]

    by_name = {}
    for r in all_runs:
        by_name.setdefault(r["name"], []).append(r)
    benchmarks = []
    for name, runs in by_name.items():
        best = min(runs, key=lambda r: r["stats"].get("median", math.inf))
        s = best["stats"]
        entry = {"name": name, "run_name": name, "run_type": "aggregate",
                 "aggregate_name": "median", "repetitions": best["repetitions"],
                 "repeats": len(runs), "iterations": best["iterations"], "threads": 1,
                 "real_time": s.get("median"), "cpu_time": best.get("cpu_ms"), "time_unit": "ms"}
        m = NAME.match(name)
        if m and "checksum" in best["counters"]:  # a workload benchmark (not runtime_bench's)
            entry.update(workload=m[1], impl=m[2], size=parse_size(m[3]), num_threads=int(m[4]))
        mins = [r["stats"]["min"] for r in runs if "min" in r["stats"]]
        entry.update({"min": min(mins) if mins else None,
                      "p10": s.get("p10"), "p90": s.get("p90"), "mean": s.get("mean"),
                      "median_max_over_repeats": max(r["stats"].get("median", 0) for r in runs)})
        entry.update(best["counters"])
        benchmarks.append(entry)

    def order(e):
        if "workload" not in e:
            return (1, 0, 0, 0, 0, e["name"])
        w = e["workload"]
        return (0, WORKLOAD_ORDER.index(w) if w in WORKLOAD_ORDER else 99, size_key(e["size"]),
                IMPL_ORDER.index(e["impl"]) if e["impl"] in IMPL_ORDER else 99, e["num_threads"],
                e["name"])
    benchmarks.sort(key=order)

    machine = {}
    for _, _, c in contexts:
        for k in MACHINE_KEYS:
            if k in c and k not in machine:
                machine[k] = c[k]
    processes = []
    for path, repeat, c in contexts:
        p = {"file": path, "repeat": repeat}
        p.update({k: c[k] for k in PROCESS_KEYS if k in c})
        processes.append(p)
    merged = {"context": dict(machine, date=datetime.datetime.now().astimezone().isoformat(
        timespec="seconds"), processes=processes), "benchmarks": benchmarks}
    return merged, all_runs, failures


def check_checksums(runs, tolerance):
    """Every run of a workload and size against the reference run. Returns the
    disagreements, one line each."""
    groups = {}
    for r in runs:
        m = NAME.match(r["name"])
        if m and "checksum" in r["counters"]:
            groups.setdefault((m[1], parse_size(m[3])), []).append((m[2], int(m[4]), r))
    problems = []
    for (workload, size), members in sorted(groups.items(), key=lambda g: (g[0][0], size_key(g[0][1]))):
        members.sort(key=lambda x: (x[0] != "nimble_reference", x[0], x[1]))
        ref_impl, ref_threads, ref = members[0]
        c0, a0 = ref["counters"]["checksum"], ref["counters"]["abssum"]
        for impl, threads, r in members[1:]:
            c, a = r["counters"]["checksum"], r["counters"]["abssum"]
            if abs(c - c0) > tolerance * abs(a0) or abs(a - a0) > tolerance * abs(a0):
                problems.append(
                    f"{workload} {size}: {impl} t{threads} (repeat {r['repeat']}) has "
                    f"checksum={c:.10g} abssum={a:.10g}, but {ref_impl} t{ref_threads} has "
                    f"checksum={c0:.10g} abssum={a0:.10g} (tolerance {tolerance:g}·abssum)")
    return problems


def fmt_ms(ms):
    if ms is None:
        return "—"
    if ms >= 100:
        return f"{ms:.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    if ms >= 1:
        return f"{ms:.2f}"
    return f"{ms:.3g}"


def table(merged, skipped=(), command="script/bench", notes=()):
    """The markdown table: one row per workload and size, one column per
    implementation and thread count, then nimble ÷ the best peer."""
    rows, cols = {}, set()
    for e in merged["benchmarks"]:
        if "workload" not in e:
            continue
        rows.setdefault((e["workload"], e["size"]), {})[(e["impl"], e["num_threads"])] = e
        cols.add((e["impl"], e["num_threads"]))
    impl_rank = {impl: i for i, impl in enumerate(IMPL_ORDER)}
    cols = sorted(cols, key=lambda c: (impl_rank.get(c[0], 99), c[0], c[1]))
    threads = sorted({t for _, t in cols})
    ctx = merged["context"]
    procs = ctx.get("processes", [])
    repeats = max([p.get("repeat", 1) for p in procs] or [1])
    blas = sorted({f"{p['blas_config'].split(' NO_')[0].split(' DYNAMIC')[0]} ({p.get('blas_threading', '?')})"
                   for p in procs if p.get("blas_config")})
    date = ctx.get("date", "")[:10]
    if not rows:  # micro benchmarks only
        return "\n".join([f"**{date}** — `{command}`"] + micro_table(merged))
    lines = [
        f"**{date}, {ctx.get('cpu_model', 'unknown CPU')} ({ctx.get('num_cpus', '?')} cores), "
        f"threads {' and '.join(map(str, threads))}** — median ms per call, the minimum over "
        f"{repeats} interleaved repeat{'s' if repeats > 1 else ''}"
        + (f"; BLAS: {', '.join(blas)}" if blas else "") + f"; `{command}`",
        "",
    ]
    header = ["workload", "size"] + [f"{impl} t{t}" for impl, t in cols] + \
             [f"nimble ÷ best peer t{t}" for t in threads]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join(["---"] * 2 + ["---:"] * (len(header) - 2)) + "|")

    def row_key(k):
        return (WORKLOAD_ORDER.index(k[0]) if k[0] in WORKLOAD_ORDER else 99, k[0], size_key(k[1]))
    for key in sorted(rows, key=row_key):
        cells = rows[key]
        line = [key[0], str(key[1])]
        for c in cols:
            e = cells.get(c)
            line.append(fmt_ms(e["real_time"]) if e else "—")
        for t in threads:
            ours = cells.get(("nimble", t))
            peers = [(e["real_time"], impl) for (impl, tt), e in cells.items()
                     if tt == t and impl in PEER_IMPLS]
            if ours and peers:
                best, name = min(peers)
                line.append(f"{ours['real_time'] / best:.2f}× ({name})")
            else:
                line.append("—")
        lines.append("| " + " | ".join(line) + " |")
    if notes or skipped:
        lines.append("")
    lines += list(notes)
    if skipped:
        lines.append("Not installed, skipped: " + "; ".join(skipped) + ".")
    lines += micro_table(merged)
    return "\n".join(lines)


def micro_table(merged):
    """The micro rows the table shows, when they ran: ELEMWISE (nimble against
    a plain C++ loop, one thread) and JIT/compile."""
    elem = {}
    for e in merged["benchmarks"]:
        m = ELEMWISE.match(e["name"])
        if m and "ns_per_element" in e:
            elem.setdefault((m[2], int(m[3])), {})[m[1]] = e["ns_per_element"]
    lines = []
    if elem:
        lines += ["", "| elementwise, t1 | n | nimble ns/element | cpp ns/element | nimble ÷ cpp |",
                  "|---|---:|---:|---:|---:|"]
        for op, n in sorted(elem, key=lambda k: (ELEMWISE_OPS.index(k[0])
                                                 if k[0] in ELEMWISE_OPS else 99, k[0], k[1])):
            ours, cpp = elem[op, n].get("nimble"), elem[op, n].get("cpp")
            ratio = f"{ours / cpp:.2f}×" if ours and cpp else "—"
            lines.append(f"| {op} | {n} | {f'{ours:.3g}' if ours else '—'} | "
                         f"{f'{cpp:.3g}' if cpp else '—'} | {ratio} |")
    jit = next((e for e in merged["benchmarks"] if e["name"] == "JIT/compile"), None)
    if jit and "kernels" in jit:
        lines += ["", f"JIT/compile (W1, W2, W3): {jit['kernels']:.0f} kernels; ms per kernel: "
                  f"median {fmt_ms(jit.get('ms_median'))}, p90 {fmt_ms(jit.get('ms_p90'))}, "
                  f"max {fmt_ms(jit.get('ms_max'))}; total {fmt_ms(jit.get('ms_total'))} ms."]
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", help="raw JSON files; NAME@R marks repeat R")
    ap.add_argument("--out", help="merged JSON to write")
    ap.add_argument("--tolerance", type=float, default=1e-5)
    args = ap.parse_args()
    inputs = []
    for f in args.files:
        path, _, rep = f.partition("@")
        inputs.append((path, int(rep) if rep else 1))
    merged, runs, failures = merge(inputs)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(merged, f, indent=1)
            f.write("\n")
    print(table(merged))
    problems = check_checksums(runs, args.tolerance)
    for p in failures + problems:
        print("error: " + p, file=sys.stderr)
    return 1 if failures or problems else 0


if __name__ == "__main__":
    sys.exit(main())
