#!/usr/bin/env python3
"""The README's performance summary from a merged bench run.

    bench/summary.py [results.json] [--readme] [--plot PNG]

Reads the merged JSON bench/run.py writes (default
build/release/bench/results/latest.json) and prints a short markdown table of
the W1-W3 rows: nimble's median milliseconds per call at each size and thread
count, and where the run measured peers, the fastest peer and the ratio (the
peer's time over nimble's: above 1, nimble is faster). With --readme it
writes the table, the run's date, machine and command between the README's
bench summary markers; --plot draws latency against sequence length (W1's
and W3's, log scale) to PNG with matplotlib (docs/latency-vs-length.png for
the README).
"""
import argparse
import json
import re
import sys
from pathlib import Path

sys.dont_write_bytecode = True
ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = {"W1": "LSTM, length L", "W2": "Tree-LSTM, n leaves", "W3": "BERT-base, L tokens"}
START = "<!-- bench summary: written by bench/summary.py --readme from a bench run -->"
END = "<!-- end bench summary -->"


def rows(merged):
    """{(workload, size, threads): {impl: median ms}} of the W1-W3 rows."""
    out = {}
    for b in merged["benchmarks"]:
        if b.get("aggregate_name", "median") != "median" or b.get("workload") not in WORKLOADS:
            continue
        if b["impl"] == "nimble_reference":
            continue
        ms = b["real_time"] * {"ms": 1, "us": 1e-3, "ns": 1e-6, "s": 1e3}[b.get("time_unit", "ms")]
        out.setdefault((b["workload"], int(b["size"]), int(b["num_threads"])), {})[b["impl"]] = ms
    return out


def table(merged, threads):
    data = {k: v for k, v in rows(merged).items() if k[2] in threads}
    peers = any(len(impls) > 1 for impls in data.values())
    head = "| workload | size | threads | nimble ms |" + (" best peer | peer ms | peer ÷ nimble |" if peers else "")
    lines = [head, "|---|---:|---:|---:|" + ("---|---:|---:|" if peers else "")]
    for (w, size, t) in sorted(data):
        impls = data[(w, size, t)]
        if "nimble" not in impls:
            continue
        line = f"| {w} ({WORKLOADS[w]}) | {size} | {t} | {impls['nimble']:.3f} |"
        others = {i: ms for i, ms in impls.items() if i != "nimble"}
        if peers:
            if others:
                best = min(others, key=others.get)
                line += f" {best} | {others[best]:.3f} | {others[best] / impls['nimble']:.2f}× |"
            else:
                line += " — | — | — |"
        lines.append(line)
    return "\n".join(lines)


def context_line(merged, command):
    ctx = merged.get("context", {})
    date = ctx.get("date", "?")[:10]
    cpu = ctx.get("cpu_model", "?")
    cpus = ctx.get("num_cpus", "?")
    return (f"Median milliseconds per call, from one run on {date} on {cpus} cores of an {cpu} "
            f"(`{command}`; `bench/summary.py --readme` wrote this section).")


def plot(merged, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    data = rows(merged)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    order = sorted({i for v in data.values() for i in v}, key=lambda i: (i != "nimble", i))
    colors = {impl: f"C{k}" for k, impl in enumerate(order)}  # the same colour in both panels
    for ax, w in zip(axes, ("W1", "W3")):
        series = {}
        for (wl, size, t), impls in data.items():
            if wl != w or t != 1:
                continue
            for impl, ms in impls.items():
                series.setdefault(impl, []).append((size, ms))
        for impl, points in sorted(series.items(), key=lambda kv: order.index(kv[0])):
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=impl, color=colors[impl],
                    linewidth=2.5 if impl == "nimble" else 1.5)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length")
        ax.set_ylabel("ms per call (1 thread)")
        ax.set_title(f"{w}: {WORKLOADS[w].split(',')[0]}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="?", default=str(ROOT / "build" / "release" / "bench" / "results" / "latest.json"))
    ap.add_argument("--readme", action="store_true", help="write the summary into README.md")
    ap.add_argument("--plot", help="draw latency against length to this PNG")
    ap.add_argument("--command", default="script/bench", help="the command that made the run")
    ap.add_argument("--threads", default="1", help="the thread counts to list (default 1)")
    args = ap.parse_args()
    merged = json.loads(Path(args.results).read_text())
    text = context_line(merged, args.command) + "\n\n" + table(merged, {int(t) for t in args.threads.split(",")})
    if args.plot:
        plot(merged, args.plot)
        rel = Path(args.plot).resolve().relative_to(ROOT) if Path(args.plot).resolve().is_relative_to(ROOT) else None
        if rel:
            text += f"\n\n![latency against sequence length]({rel})"
    print(text)
    if args.readme:
        readme = ROOT / "README.md"
        s = readme.read_text()
        if START not in s or END not in s:
            sys.exit("summary: README.md has no bench summary markers")
        before, rest = s.split(START, 1)
        _, after = rest.split(END, 1)
        readme.write_text(before + START + "\n" + text + "\n" + END + after)


if __name__ == "__main__":
    main()
