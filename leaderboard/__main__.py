"""`python -m leaderboard --out report.html [FILES...]`: write the standalone HTML report.

With no files it reads the committed records under leaderboard/results/. Bad lines are
listed on stderr and in the report, and skipped; they do not stop the report, because
the point is to show what is there. A missing or empty input still writes a report
that says so.
"""

from __future__ import annotations

import argparse
import sys

from .report import write_report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m leaderboard",
                                 description="Write the berteval leaderboard as one self-contained HTML file.")
    ap.add_argument("files", nargs="*", help="record files (.jsonl) or folders of them; default leaderboard/results/")
    ap.add_argument("--out", default="report.html", help="HTML file to write (default %(default)s)")
    ap.add_argument("--title", default="berteval leaderboard", help="page title")
    ap.add_argument("--repo", default=None,
                    help="read the records from this Hugging Face dataset repo (owner/name[@revision]) where the hub "
                         "is reachable (default $BERTEVAL_RESULTS_REPO; else leaderboard/results)")
    ap.add_argument("--data-dir", default=None,
                    help="data folder, to show the text of each disagreeing example (default $BERTEVAL_DATA)")
    args = ap.parse_args(argv)
    out, df, problems = write_report(args.out, args.files or None, args.title, repo=args.repo,
                                     data_dir=args.data_dir)
    for p in problems:
        print(f"skipped {p}", file=sys.stderr)
    size = out.stat().st_size
    print(f"wrote {out} ({size / 1e6:.1f} MB): {len(df)} records, {df['task'].nunique()} task(s), "
          f"{len(problems)} bad line(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
