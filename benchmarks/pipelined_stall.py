"""Issue 14: the pipelined stall. Curves and staleness of a set of real runs, for docs/validation.

Given labelled run directories of ``gcsim real`` (each with ``metrics.csv``, ``iterations.csv`` and,
from trace format with issue 14 on, ``staleness.csv``), writes into ``--out``:

* ``pipelined_accuracy.png`` – test accuracy and mean training loss against iterations;
* ``pipelined_accuracy_time.png`` – test accuracy against training wall time (sum of iteration
  durations) and against iterations, with the 40 % / 50 % targets;
* ``pipelined_summary.md`` – per run: lr, mean iteration time, final test accuracy and training loss,
  iterations / seconds to 40 % and 50 %, staleness used vs declared (share of used partition
  gradients older than the scheme declares, how many iterations had one, the oldest), the load
  averages recorded beside the run (``<run>.load`` next to the run directory, if present);
* ``runs/<label>/`` – the traces (config, iterations, workers, metrics, staleness, meta; no checkpoint).

    .venv/bin/python benchmarks/pipelined_stall.py --out docs/validation/pipelined \\
        "pgc-fr lr 0.05 (before fix)=/tmp/i14/pgcfr-lr05-before" "uncoded lr 0.05=/tmp/i14/uncoded-lr05"
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pandas as pd
import yaml

from gcsim.real.staleness import summarize_staleness
from gcsim.study.accuracy import accuracy_curve, plot_accuracy, plot_accuracy_time, time_to_accuracy

KEEP = ("config.yaml", "real.yaml", "iterations.csv", "workers.csv", "metrics.csv", "staleness.csv", "meta.json",
        "summary.csv", "status.json")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", metavar="LABEL=RUN_DIR")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = Path(args.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    metrics, curves, exact, rows = {}, {}, {}, []
    for item in args.runs:
        label, _, path = item.partition("=")
        d = Path(path)
        mt, its = pd.read_csv(d / "metrics.csv"), pd.read_csv(d / "iterations.csv")
        real = yaml.safe_load((d / "real.yaml").read_text()) if (d / "real.yaml").is_file() else {}
        scheme = str(its["scheme"].iloc[0])
        metrics[label], curves[label], exact[label] = mt, accuracy_curve(mt, its), scheme not in ("pgc-fr", "pgc-cr")
        tta = time_to_accuracy(mt, its)
        st = summarize_staleness(pd.read_csv(d / "staleness.csv")) if (d / "staleness.csv").is_file() else {}
        load = (d.parent / f"{d.name}.load")
        rows.append({
            "run": label, "scheme": scheme, "lr": real.get("lr"), "momentum": real.get("momentum"),
            "mean iteration s": f"{its['duration_s'].mean():.3f}",
            "final test acc.": f"{mt['test_accuracy'].iloc[-1]:.1%}", "final train loss": f"{mt['loss'].iloc[-1]:.2f}",
            **{f"to {round(t * 100)} %: iters / s": (f"{r:.0f} / {w:.0f}" if r == r else "-")
               for t, r, w in zip(tta["target"], tta["iterations"], tta["wall_s"])},
            "used partitions older than declared": (f"{st['older_than_declared']}/{st['entries']} "
                                                    f"({st['fraction_older']:.1%}) in {st['iterations_affected']} "
                                                    f"iterations, oldest {st['max_staleness']} (declared ≤ "
                                                    f"{st['max_declared']})") if st else "-",
            "load avg (before; after)": load.read_text().replace("\n", "; ").strip("; ") if load.is_file() else "-",
        })
        dst = out / "runs" / label.replace(" ", "_").replace("(", "").replace(")", "").replace(",", "")
        dst.mkdir(exist_ok=True)
        for name in KEEP:
            if (d / name).is_file():
                shutil.copy2(d / name, dst / name)
    plot_accuracy(metrics, exact, out / "pipelined_accuracy.png")
    plot_accuracy_time(curves, exact, out / "pipelined_accuracy_time.png")
    table = pd.DataFrame(rows)
    md = "| " + " | ".join(table.columns) + " |\n|" + "---|" * len(table.columns) + "\n"
    md += "\n".join("| " + " | ".join(str(v) for v in r) + " |" for r in table.itertuples(index=False))
    (out / "pipelined_summary.md").write_text(md + "\n")
    print(md)


if __name__ == "__main__":
    main()
