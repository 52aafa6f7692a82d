"""Markdown for bench/service/load.sh: its scenarios' `gpupipe bench --json` reports, each with
the echo floor measured in the same run, and the targets of the small-job work.

usage: load_report.py OUT_DIR   (writes OUT_DIR/service-load.md and prints it)
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report_lib import run_header, yes_no  # noqa: E402


def load(out, name):
    path = os.path.join(out, name + ".json")
    return json.load(open(path)) if os.path.exists(path) else None


def point(report, concurrency):
    for p in (report or {}).get("points", []):
        if p.get("concurrency") == concurrency:
            return p
    return None


def row(name, p):
    g, e = p["gpupipe"], p.get("echo")
    lat = g["latency_us"]
    b = g.get("breakdown_us", {})
    cells = [name, str(p["concurrency"]), f"{g['throughput']:,.0f}",
             f"{e['throughput']:,.0f}" if e else "-",
             f"{lat['p50']:.0f}", f"{e['latency_us']['p50']:.0f}" if e else "-",
             f"{lat['p99']:.0f}", f"{e['latency_us']['p99']:.0f}" if e else "-",
             f"{b.get('queue', 0):.0f}", f"{b.get('device', 0):.0f}",
             f"{b.get('server', 0):.0f}", f"{b.get('transport', 0):.0f}",
             f"{g.get('kernels_per_job', 0):.3f}", f"{g.get('mean_batch_jobs', 0):.1f}",
             str(g["errors"] + g["mismatches"])]
    return "| " + " | ".join(cells) + " |"


def cpu_table(reports):
    """Each end's CPU a request over the measured window (`gpupipe bench`'s CpuMeter): the
    bench process (client) and the daemon or the floor's process (server)."""
    def us(v):
        return f"{v:.0f}" if v is not None else "-"
    rows = []
    for name, report in reports.items():
        for p in (report or {}).get("points", []):
            g = p["gpupipe"].get("cpu_us_per_request") or {}
            e = (p.get("echo") or {}).get("cpu_us_per_request") or {}
            if g.get("client") is None and g.get("server") is None:
                continue
            parts = [g.get("client"), g.get("server"), e.get("client"), e.get("server")]
            ratio = "-"
            if None not in parts and parts[2] + parts[3] > 0:
                ratio = f"{(parts[0] + parts[1]) / (parts[2] + parts[3]):.2f}x"
            rows.append(f"| {name} | {p['concurrency']} | " +
                        " | ".join(us(v) for v in parts) + f" | {ratio} |")
    if not rows:
        return []
    return ["CPU a request, each end, over the measured window: the bench's own process "
            "(client: its job or echo calls, result checks included) and the serving process "
            "(the daemon, from its stats' process_cpu_seconds; the floor's, from /proc). "
            "Both ends share the host's cores, so where the load is CPU-bound their sum sets "
            "the throughput.", "",
            "| scenario | concurrency | job client us | daemon us | echo client us | "
            "echo server us | job / echo, both ends |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"] + rows + [""]


def main():
    out = sys.argv[1]
    reports = {n: load(out, n)
               for n in ("unbatched", "batched", "high_idle", "probe", "flood_low",
                         "high_idle_listener", "probe_listener", "flood_low_listener", "flood")}
    lines = ["# Small jobs: `gpupipe bench` against its echo floor", ""]
    lines += run_header(os.path.join(out, "load-meta.json"))
    any_report = next((r for r in reports.values() if r), None)
    if any_report:
        lines += [f"Daemon on the **{any_report['backend']}** backend over loopback, "
                  f"{any_report['channels']} client connections (each its own client-id), "
                  f"{any_report['duration_seconds']:g} s measured per point after "
                  f"{any_report['warmup_seconds']:g} s warm-up. Job: "
                  f"{any_report['mix'][0]}. Every result was compared with the first result "
                  "of the same input (8 random inputs per entry). The floor (**echo**) is a "
                  "unary gRPC call served on loopback by a process the bench starts, "
                  "carrying the job's input bytes and returning its output's, at the same "
                  "concurrency and over as many connections, measured right after each "
                  "point.", ""]
    flags_file = os.path.join(out, "daemon-flags.txt")
    extra = open(flags_file).read().strip() if os.path.exists(flags_file) else ""
    if extra:
        lines += [f"Every daemon of this run had `{extra}` besides its scenario's flags.", ""]
    lines += ["| scenario | concurrency | jobs/s | echo calls/s | p50 us | echo p50 us | "
              "p99 us | echo p99 us | queue us | device us | server us | transport us | "
              "kernels/job | jobs/launch | errors |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
              "---: | ---: | ---: | ---: |"]
    for name, report in reports.items():
        for p in (report or {}).get("points", []):
            lines.append(row(name, p))
    lines.append("")
    for name, report in reports.items():
        for p in (report or {}).get("points", []):
            s = p.get("echo_stream")
            if s:
                lines.append(f"- {name}, concurrency {p['concurrency']}: the floor as a "
                             f"server-streaming call with one reply (Submit's shape): "
                             f"{s['throughput']:,.0f} calls/s, p50 {s['latency_us']['p50']:.0f} "
                             f"us, p99 {s['latency_us']['p99']:.0f} us.")
    if lines[-1] != "":
        lines.append("")
    lines += cpu_table(reports)
    lines += ["- **accept**: the daemon's work on a request before its job was accepted "
              "(decoding, validation, planning, admission), median "
              + ", ".join(f"{n} {p['gpupipe']['breakdown_us'].get('accept', 0):.0f} us"
                          f" at {p['concurrency']}"
                          for n, r in reports.items() for p in (r or {}).get("points", [])
                          if n in ("unbatched", "batched")) + ".",
              "- **queue, device, server**: medians of the jobs' own Timing: accepted until "
              "a lane took the job; its copies and kernels (a batched job's share); accepted "
              "until its result was handed to gRPC. **transport**: the client's latency less "
              "the accept and server times: both ends' RPC work and the loopback (the floor "
              "pays the same). The floor serves from a process of its own, as the daemon "
              "does.", ""]

    targets = []
    unb1, unb64 = point(reports["unbatched"], 1), point(reports["unbatched"], 64)
    b256 = point(reports["batched"], 256)
    if unb1 and unb1.get("echo"):
        r = unb1["gpupipe"]["latency_us"]["p50"] / unb1["echo"]["latency_us"]["p50"]
        targets.append(("small job, concurrency 1, p50 <= 1.5 x echo p50", f"{r:.2f}x",
                        r <= 1.5))
    if unb64 and unb64.get("echo"):
        r = unb64["gpupipe"]["throughput"] / unb64["echo"]["throughput"]
        targets.append(("the same, concurrency 64, throughput >= 0.7 x echo", f"{r:.2f}x",
                        r >= 0.7))
    if b256 and b256.get("echo"):
        r = b256["gpupipe"]["throughput"] / b256["echo"]["throughput"]
        k = b256["gpupipe"]["kernels_per_job"]
        targets.append(("with batching, concurrency 256, throughput >= 1.0 x echo",
                        f"{r:.2f}x", r >= 1.0))
        targets.append(("with batching, concurrency 256, kernel launches per job <= 0.1",
                        f"{k:.3f}", k <= 0.1))
    def probe_target(what, idle, probe):
        idle_p99 = idle["points"][0]["gpupipe"]["latency_us"]["p99"] if idle else 0
        if not probe or idle_p99 <= 0:
            return
        g = probe["points"][0]["gpupipe"]
        r = g["latency_us"]["p99"] / idle_p99
        targets.append((f"{what} ({g['requests']} high jobs; idle p99 {idle_p99:.0f} us, under "
                        f"flood {g['latency_us']['p99']:.0f} us, its server time p50 "
                        f"{g['breakdown_us']['server']:.0f} us)", f"{r:.2f}x", r <= 3))

    probe_target("high-priority p99 through the priority listener (--priority-listen), its own "
                 "client, while another floods low-priority jobs at 256 on the main address "
                 "<= 3 x its idle p99 through the listener",
                 reports["high_idle_listener"], reports["probe_listener"])
    probe_target("the same through the main address, beside the flood",
                 reports["high_idle"], reports["probe"])
    idle, flood = reports["high_idle"], reports["flood"]
    idle_p99 = idle["points"][0]["gpupipe"]["latency_us"]["p99"] if idle else 0
    if flood and idle_p99 > 0:
        entries = flood["points"][0]["gpupipe"]["entries"]
        high = next((e for e in entries if e["entry"].endswith(" high")), None)
        if high:
            r = high["latency_us"]["p99"] / idle_p99
            targets.append((f"the same, the high job in the flooding client's own process "
                            f"({high['requests']} high jobs; p99 "
                            f"{high['latency_us']['p99']:.0f} us, its server time p50 "
                            f"{high.get('server_us', 0):.0f} us)", f"{r:.2f}x", r <= 3))
    lines += ["| target | measured | met |", "| --- | ---: | :---: |"]
    for what, measured, met in targets:
        lines.append(f"| {what} | {measured} | {yes_no(met)} |")
    unbatched_stats = os.path.join(out, "unbatched-stats.json")
    if os.path.exists(unbatched_stats):
        s = json.load(open(unbatched_stats))
        lines += ["", f"Daemon figures after the unbatched scenarios: "
                  f"{int(s.get('direct_runs', 0))} jobs ran on the thread that received them "
                  f"(direct runs)."]
    stats = os.path.join(out, "stats.json")
    if os.path.exists(stats):
        s = json.load(open(stats))
        b = s.get("batching", {})
        lines += ["", f"Daemon figures after the batched scenarios: "
                  f"{b.get('batches', 0)} batches served {b.get('batched_jobs', 0)} jobs, "
                  f"the largest {b.get('largest', 0)}; {int(s.get('direct_runs', 0))} jobs "
                  f"were direct runs."]
    text = "\n".join(lines) + "\n"
    open(os.path.join(out, "service-load.md"), "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
