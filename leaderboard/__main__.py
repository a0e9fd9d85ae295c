"""`python -m leaderboard --out report.html [FILES...]`: write the HTML report, one self-contained file.

Plotly's JavaScript, the figures and the CSV downloads are packed inside it (leaderboard/packing.py), so it opens
offline and writes nothing beside itself; `--with-files` also writes every disagreeing example as CSV files in
`<name>_files/` beside it. With no files it reads the committed records under leaderboard/results/. Bad lines are
listed on stderr and in the report, and skipped; they do not stop the report, because
the point is to show what is there. A missing or empty input still writes a report
that says so.
"""

from __future__ import annotations

import argparse
import sys

from berteval.errors import BertevalError

from . import MISSING, missing_message


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m leaderboard",
                                 description="Write the berteval leaderboard as an HTML report (offline: nothing is "
                                             "fetched from the network).")
    ap.add_argument("files", nargs="*", help="record files (.jsonl) or folders of them; default leaderboard/results/")
    ap.add_argument("--out", default="report.html", help="HTML file to write (default %(default)s)")
    ap.add_argument("--title", default="berteval leaderboard", help="page title")
    ap.add_argument("--repo", default=None,
                    help="read the records from this Hugging Face dataset repo (owner/name[@revision]) where the hub "
                         "is reachable (default $BERTEVAL_RESULTS_REPO; else leaderboard/results)")
    ap.add_argument("--data-dir", default=None,
                    help="data folder, to show the text of each disagreeing example (default $BERTEVAL_DATA)")
    ap.add_argument("--with-files", action="store_true",
                    help="also write every disagreeing example as CSV files in <name>_files/ beside the report")
    ap.add_argument("--self-contained", action="store_true",
                    help="accepted for old scripts: the report is always one self-contained file now")
    args = ap.parse_args(argv)
    if MISSING:  # installed without the app extra: one line saying what to install
        print(f"error: {missing_message()}", file=sys.stderr)
        return 2
    from .report import write_report

    try:
        out, df, problems = write_report(args.out, args.files or None, args.title, repo=args.repo,
                                         data_dir=args.data_dir, with_files=args.with_files)
    except BertevalError as exc:  # e.g. the report cannot be written whole: one line, the old report kept
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for p in problems:
        print(f"skipped {p}", file=sys.stderr)
    size = out.stat().st_size
    folder = out.parent / f"{out.stem}_files"
    beside = "" if not args.with_files or not folder.is_dir() else \
        f"; beside it {folder}/ ({sum(f.stat().st_size for f in folder.iterdir()) / 1e6:.1f} MB of CSV files)"
    print(f"wrote {out} ({size / 1e6:.1f} MB{beside}): {len(df)} records, {df['task'].nunique()} task(s), "
          f"{len(problems)} bad line(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
