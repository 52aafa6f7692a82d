"""Helpers shared by the bench/*/report.py scripts. Standard library only."""
import json
import math
import os


def json_lines(path):
    """The JSON objects of a file's lines that start with '{' (other lines, such as a human
    table printed beside them, are skipped); [] when the file does not exist."""
    out = []
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return out


def us(v):
    """Microseconds for a table: 4 significant figures or so, 'n/a' for a missing value."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:.1f}"
    return f"{v:.2f}"


def yes_no(ok):
    """A target's 'met' cell."""
    return "n/a" if ok is None else ("**yes**" if ok else "**no**")


def run_header(meta_path):
    """The report lines naming where and when a run took place, from the metadata run.sh wrote
    (bench_write_meta in bench/lib.sh); [] when there is none."""
    if not os.path.exists(meta_path):
        return []
    with open(meta_path, encoding="utf-8") as f:
        meta = json.load(f)
    return [f"Commit {meta.get('commit')}, {meta.get('date')}; GPU: {meta.get('gpu') or 'none'}; "
            f"host: {meta.get('cpu')} ({meta.get('host_cores')} cores).", ""]
