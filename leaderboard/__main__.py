"""`python -m leaderboard --out report.html [FILES...]`: write the HTML report (and `report_files/` beside it).

The page links to what it does not need to hold: Plotly's JavaScript, the table, every disagreeing
example and every record as CSV files, written in `<name>_files/` beside it; `--self-contained`
writes one file instead. With no files it reads the committed records under leaderboard/results/. Bad lines are
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
    ap.add_argument("--self-contained", action="store_true",
                    help="one file: Plotly's JavaScript (4.8 MB) and every record inside the page, the disagreements "
                         "as a few per pair, no files beside it")
    args = ap.parse_args(argv)
    if MISSING:  # installed without the app extra: one line saying what to install
        print(f"error: {missing_message()}", file=sys.stderr)
        return 2
    from .report import write_report

    try:
        out, df, problems = write_report(args.out, args.files or None, args.title, repo=args.repo,
                                         data_dir=args.data_dir, self_contained=args.self_contained)
    except BertevalError as exc:  # e.g. the report cannot be written whole: one line, the old report kept
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for p in problems:
        print(f"skipped {p}", file=sys.stderr)
    size = out.stat().st_size
    folder = out.parent / f"{out.stem}_files"
    beside = "" if args.self_contained or not folder.is_dir() else \
        f"; beside it {folder}/ ({sum(f.stat().st_size for f in folder.iterdir()) / 1e6:.1f} MB: Plotly, CSV files)"
    print(f"wrote {out} ({size / 1e6:.1f} MB{beside}): {len(df)} records, {df['task'].nunique()} task(s), "
          f"{len(problems)} bad line(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
