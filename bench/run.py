#!/usr/bin/env python3
"""Runs the bench programs, one process per implementation and thread count.

script/bench calls this after building the release preset. For every repeat
(interleaved: repeat 1 of every configuration, then repeat 2, ...), for every
implementation a bench program offers, for every thread count, it starts

    build/release/bench/<program> --impl=<impl> --threads=<n> [--quick]
        --benchmark_out=<raw json> --benchmark_out_format=json

with OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = MKL_NUM_THREADS = n and Debian's
OpenMP build of OpenBLAS first on the library path (so that libtorch's
libblas.so.3 is OpenBLAS, whatever the system default). Then it merges the
raw files (bench/merge_results.py), checks the checksums, writes
build/release/bench/results/latest.json (--quick: quick.json beside it)
and prints the markdown table.

To keep the full run near half an hour on two cores, nimble_reference (the
reference interpreter, never part of a ratio) runs in the first repeat only,
and a benchmark whose median call took more than a second in the first
repeat is not repeated (--slow-seconds).
"""
import argparse
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import merge_results  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def openblas_openmp_dir():
    for d in sorted(glob.glob("/usr/lib/*/openblas-openmp")):
        if os.path.exists(os.path.join(d, "libblas.so.3")):
            return d
    return None


def read_programs(bench_dir):
    path = bench_dir / "programs.txt"
    if not path.exists():
        sys.exit(f"bench: {path} is missing; configure and build the release preset first")
    programs, micro, skipped = [], [], []
    for line in path.read_text().splitlines():
        kind, _, rest = line.partition(" ")
        {"workload": programs, "micro": micro, "skipped": skipped}.get(kind, []).append(rest)
    return programs, micro, skipped


def with_threads(name, threads):
    return re.sub(r"/t\d+$", f"/t{threads}", name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="each benchmark once at its smallest size, one repeat")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repeats (default 3)")
    ap.add_argument("--reference-repeats", type=int, default=1,
                    help="repeats of nimble_reference (default 1)")
    ap.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    ap.add_argument("--impl", help="only these implementations (comma-separated)")
    ap.add_argument("--filter", help="only benchmarks whose name matches this regex")
    ap.add_argument("--budget", type=float, default=4.0,
                    help="seconds of timed calls per benchmark, within 5..20 calls (default 4)")
    ap.add_argument("--slow-seconds", type=float, default=1.0,
                    help="benchmarks slower than this per call in the first repeat are not "
                         "repeated (default 1)")
    ap.add_argument("--tolerance", type=float, default=1e-5,
                    help="checksum agreement, relative to abssum (default 1e-5)")
    ap.add_argument("--build-dir", default=str(ROOT / "build" / "release"))
    ap.add_argument("--out", help="merged JSON (default <build-dir>/bench/results/latest.json; with "
                    "--quick quick.json beside it, so that CI leaves the full results alone)")
    args = ap.parse_args()

    bench_dir = Path(args.build_dir) / "bench"
    raw_dir = bench_dir / "results"
    if not args.out:
        args.out = str(raw_dir / ("quick.json" if args.quick else "latest.json"))
    raw_dir.mkdir(parents=True, exist_ok=True)
    for old in [*raw_dir.glob("*.json"), *raw_dir.glob("*.log")]:
        if old.name not in ("quick.json", "latest.json"):
            old.unlink()
    programs, micro_programs, skipped = read_programs(bench_dir)
    thread_counts = [int(t) for t in args.threads.split(",")]
    only = set(args.impl.split(",")) if args.impl else None
    repeats = 1 if args.quick else args.repeats
    pattern = re.compile(args.filter) if args.filter else None
    mode = ["--quick"] if args.quick else [f"--budget={args.budget}"]

    # Which implementations each program offers, and whether any of their
    # benchmarks is selected.
    configs = []
    for program in programs:
        exe = bench_dir / program
        listing = subprocess.run([str(exe), "--list"] + (["--quick"] if args.quick else []),
                                 capture_output=True, text=True)
        if listing.returncode != 0:
            print(f"bench: {program} does not start, skipped:\n{listing.stderr}", file=sys.stderr)
            skipped.append(f"{program}: does not start ({listing.stderr.strip()[:200]})")
            continue
        names = listing.stdout.split()
        impls = sorted({n.split("/")[1] for n in names},
                       key=lambda i: (merge_results.IMPL_ORDER.index(i)
                                      if i in merge_results.IMPL_ORDER else 99, i))
        for impl in impls:
            if only and impl not in only:
                continue
            selected = {t: [with_threads(n, t) for n in names if n.split("/")[1] == impl]
                        for t in thread_counts}
            if pattern:
                selected = {t: [n for n in ns if pattern.search(n)] for t, ns in selected.items()}
            if any(selected.values()):
                configs.append((program, impl, selected))

    env = dict(os.environ)
    blas_dir = openblas_openmp_dir()
    if blas_dir:
        env["LD_LIBRARY_PATH"] = blas_dir + (":" + env["LD_LIBRARY_PATH"]
                                             if env.get("LD_LIBRARY_PATH") else "")
    else:
        print("bench: Debian's libopenblas0-openmp is not installed: libtorch runs on whatever "
              "libblas.so.3 the system selects (see the JSON's blas_library)", file=sys.stderr)

    plan = []
    for repeat in range(1, repeats + 1):
        for program, impl, selected in configs:
            if impl == "nimble_reference" and repeat > args.reference_repeats:
                continue
            for t in thread_counts:
                if selected[t]:
                    plan.append((program, impl, t, repeat, selected[t]))
    # Micro programs (plain Google Benchmark) run once, when no implementation
    # was asked for and the filter selects some of their benchmarks.
    micro = [p for p in micro_programs if not only and (
        not pattern or any(pattern.search(n) for n in subprocess.run(
            [str(bench_dir / p), "--benchmark_list_tests"],
            capture_output=True, text=True).stdout.split()))]

    start = time.monotonic()
    outputs, failed = [], []
    slow = set()  # benchmarks slower than --slow-seconds per call in repeat 1: not repeated
    for i, (program, impl, t, repeat, selected) in enumerate(plan, 1):
        stem = f"{impl}_t{t}_r{repeat}"
        out = raw_dir / f"{stem}.json"
        excluded = [n for n in selected if n in slow]
        if len(excluded) == len(selected):
            print(f"[{i}/{len(plan)}] {impl} t{t} repeat {repeat}: all slow, not repeated",
                  file=sys.stderr, flush=True)
            continue
        cmd = [str(bench_dir / program), f"--impl={impl}", f"--threads={t}", *mode,
               f"--benchmark_out={out}", "--benchmark_out_format=json"]
        if args.filter:
            cmd.append(f"--benchmark_filter={args.filter}")
        if excluded:
            cmd.append("--exclude=" + ",".join(excluded))
        penv = dict(env, OMP_NUM_THREADS=str(t), OPENBLAS_NUM_THREADS=str(t),
                    MKL_NUM_THREADS=str(t))
        began = time.monotonic()
        with open(raw_dir / f"{stem}.log", "w") as log:
            rc = subprocess.run(cmd, env=penv, stdout=log, stderr=subprocess.STDOUT).returncode
        print(f"[{i}/{len(plan)}] {impl} t{t} repeat {repeat}: {time.monotonic() - began:.0f} s"
              + ("" if rc == 0 else f"  FAILED (exit {rc}), see {raw_dir / (stem + '.log')}"),
              file=sys.stderr, flush=True)
        if rc != 0:
            failed.append(f"{impl} t{t} repeat {repeat}")
            sys.stderr.write("".join((raw_dir / f"{stem}.log").read_text().splitlines(True)[-15:]))
        if out.exists():
            outputs.append((str(out), repeat))
            if repeat == 1:
                _, runs, _ = merge_results.read_runs(str(out), 1)
                slow |= {r["name"] for r in runs
                         if r["stats"].get("median", 0) > args.slow_seconds * 1e3}

    for program in micro:
        out = raw_dir / f"{program}.json"
        cmd = [str(bench_dir / program), f"--benchmark_out={out}", "--benchmark_out_format=json"]
        cmd += ["--benchmark_min_time=0.01"] if args.quick else [
            "--benchmark_repetitions=5", "--benchmark_report_aggregates_only=true"]
        if args.filter:
            cmd.append(f"--benchmark_filter={args.filter}")
        began = time.monotonic()
        with open(raw_dir / f"{program}.log", "w") as log:
            rc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
        print(f"[{program}] {time.monotonic() - began:.0f} s"
              + ("" if rc == 0 else f"  FAILED (exit {rc}), see {raw_dir / (program + '.log')}"),
              file=sys.stderr, flush=True)
        if rc != 0:
            failed.append(program)
        if out.exists():
            outputs.append((str(out), 1))

    merged, runs, failures = merge_results.merge(outputs)
    merged["context"]["skipped_peers"] = skipped
    merged["context"]["command"] = "script/bench " + " ".join(map(shlex.quote, sys.argv[1:]))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(merged, f, indent=1)
        f.write("\n")
    command = merged["context"]["command"].strip()
    notes = []
    if repeats > 1:
        notes.append(f"nimble_reference, and benchmarks slower than {args.slow_seconds:g} s per "
                     "call in the first repeat, ran in one repeat only.")
    print(merge_results.table(merged, skipped, command, notes))
    print(f"\n{len(plan) + len(micro)} processes in {time.monotonic() - start:.0f} s; "
          f"results in {os.path.relpath(args.out)}", file=sys.stderr)

    problems = merge_results.check_checksums(runs, args.tolerance)
    for p in failed:
        print(f"error: process failed: {p}", file=sys.stderr)
    for p in failures + problems:
        print(f"error: {p}", file=sys.stderr)
    if not problems and not failures:
        groups = {(r["name"].split("/")[0], r["name"].split("/")[2]) for r in runs
                  if "checksum" in r["counters"]}
        print(f"checksums agree ({len(groups)} workload sizes, tolerance {args.tolerance:g}·abssum)",
              file=sys.stderr)
    return 1 if failed or failures or problems else 0


if __name__ == "__main__":
    sys.exit(main())
