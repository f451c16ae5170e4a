#!/usr/bin/env python3
"""One table from the logs of bench/gpu.sh: for each figure and each of our rows (target, API),
our median, the C reference's (median over its runs), cuda-python's, and ours/C against the goal
(raw bindings within 3% of C, the safe layer within 15%).

    python3 bench/gpu_table.py --ours ours.log --c c.log --peer peer.log [--machine machine.txt]

Our lines and the peer's:  RESULT <target> <api> <figure> <value or ERROR/crashed/...>
The C reference's lines:   c driver=13000 B1_stream_launch_us=2.953 / c B2_graph_replay_us=... /
                           c B3_chain64_node_us=...
"""

import argparse
import os
import re
import statistics

FIGURES = ("B1", "B2", "B3")
UNITS = {"B1": "per callback", "B2": "per launch", "B3": "per node"}
C_KEYS = {"B1": "B1_stream_launch_us", "B2": "B2_graph_replay_us", "B3": "B3_chain64_node_us"}
GOAL = {"driver": 1.03, "runtime": 1.03, "safe": 1.15}


def read(path):
    if not path or not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def results(text):
    """RESULT lines: [(target, api, figure, value)] where value is a float or a short text."""
    out = []
    for line in text.splitlines():
        parts = line.split(maxsplit=4)
        if len(parts) < 5 or parts[0] != "RESULT" or parts[3] not in FIGURES:
            continue
        target, api, figure, rest = parts[1], parts[2], parts[3], parts[4]
        first = rest.split()[0]
        try:
            value = float(first)
        except ValueError:
            value = rest
        out.append((target, api, figure, value))
    return out


def c_figures(text):
    """The C reference's medians per figure, the number of runs, and the driver version."""
    medians, runs = {}, 0
    for figure, key in C_KEYS.items():
        values = [float(v) for v in re.findall(re.escape(key) + r"=([0-9.]+)", text)]
        if values:
            medians[figure] = statistics.median(values)
            runs = max(runs, len(values))
    driver = re.search(r"driver=(\d+)", text)
    return medians, runs, driver.group(1) if driver else None


def cell(value, width):
    if isinstance(value, float):
        return f"{value:>{width}.3f}"
    text = value if value else "-"
    if len(text) > width:
        text = text[: width - 3] + "..."
    return f"{text:>{width}}"


def table(ours, c, peer):
    header = (
        f"{'figure':<16} {'ours: target api':<18} {'ours us':>9} {'C us':>9} "
        f"{'cuda-python us':>22} {'ours/C':>7}  goal"
    )
    lines = [header, "-" * len(header)]
    for figure in FIGURES:
        rows = [r for r in ours if r[2] == figure] or [("(none)", "", figure, "no result")]
        peer_value = next((r[3] for r in peer if r[2] == figure), "-" if figure == "B3" else "no result")
        for target, api, _, value in rows:
            c_value = c.get(figure)
            ratio, verdict = "-", ""
            if isinstance(value, float) and c_value:
                r = value / c_value
                ratio = f"{r:.3f}"
                goal = GOAL.get(api)
                if goal:
                    verdict = f"{'ok' if r <= goal else 'OVER'} (<= {goal:.2f})"
            lines.append(
                f"{figure + ' ' + UNITS[figure]:<16} {target + ' ' + api:<18} {cell(value, 9)} "
                f"{cell(c_value if c_value else 'no result', 9)} {cell(peer_value, 22)} {ratio:>7}  {verdict}"
            )
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ours", help="log of the bench executable")
    ap.add_argument("--c", help="logs of the C reference's runs, concatenated")
    ap.add_argument("--peer", help="log of bench/peer_cuda_python.py")
    ap.add_argument("--machine", help="a file describing the GPU and driver (nvidia-smi)")
    args = ap.parse_args()

    ours = results(read(args.ours))
    c, c_runs, c_driver = c_figures(read(args.c))
    peer = [r for r in results(read(args.peer)) if r[0] == "cuda-python"]
    machine = read(args.machine).strip()
    if machine:
        print(f"machine: {' | '.join(machine.splitlines())}")
    if c_driver:
        print(f"C reference: median of {c_runs} runs, cuDriverGetVersion {c_driver}")
    print("host-callback cost in microseconds (lower is better)")
    print(table(ours, c, peer))
    errors = [r for r in ours if not isinstance(r[3], float)]
    for target, api, figure, value in errors:
        print(f"ours {target} {api} {figure}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
