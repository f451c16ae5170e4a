#!/usr/bin/env python3
"""One table from the logs of bench/gpu.sh: for each figure and each of our rows (target, API),
our median over the rounds with its min..max, the C references' (driver and runtime API) the
same way, cuda-python's, and ours/C against the goal (raw bindings within 3% of C, the safe
layer within 15%). Runtime rows are compared with the C runtime-API reference, driver and safe
rows with the C driver-API reference.

    python3 bench/gpu_table.py --ours ours.log --c c.log --crt crt.log --peer peer.log \
        [--machine machine.txt] [--setup "how the rounds ran"]

The logs are those of R interleaved rounds; gpu.sh writes a line `ROUND <r>` into each log
before the round's run, so that ours and C can be paired within a round. Lines before any
`ROUND` belong to no round (such figures still count towards medians, not towards pairs).

Our lines and the peer's:  RESULT <target> <api> <figure> <value or ERROR/crashed/...>
The C driver reference's:  c driver=13000 B1_stream_launch_us=2.953 / c B2_graph_replay_us=...
                           / c B3_chain64_node_us=...
The C runtime reference's: crt runtime=13000 B1_stream_launch_us=3.101 / crt B2_... / crt B3_...
"""

import argparse
import os
import re
import statistics

FIGURES = ("B1", "B2", "B3")
UNITS = {"B1": "per callback", "B2": "per launch", "B3": "per node"}
C_KEYS = {"B1": "B1_stream_launch_us", "B2": "B2_graph_replay_us", "B3": "B3_chain64_node_us"}
GOAL = {"driver": 1.03, "runtime": 1.03, "safe": 1.15}
# Which C reference each API of ours is compared with.
REFERENCE = {"driver": "drv", "safe": "drv", "runtime": "rt"}
ROUND = re.compile(r"^ROUND (\d+)\s*$")


def read(path):
    if not path or not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def rounds_of(text):
    """(round, line) for every line; round is None before the first `ROUND` marker."""
    current = None
    for line in text.splitlines():
        m = ROUND.match(line)
        if m:
            current = int(m.group(1))
            continue
        yield current, line


def results(text):
    """RESULT lines: [(round, target, api, figure, value)], value a float or a short text."""
    out = []
    for rnd, line in rounds_of(text):
        parts = line.split(maxsplit=4)
        if len(parts) < 5 or parts[0] != "RESULT" or parts[3] not in FIGURES:
            continue
        target, api, figure, rest = parts[1], parts[2], parts[3], parts[4]
        try:
            value = float(rest.split()[0])
        except ValueError:
            value = rest
        out.append((rnd, target, api, figure, value))
    return out


def c_runs(text, prefix, version_key):
    """A C reference's values: ({figure: [(round, value)]}, its version or None)."""
    values = {f: [] for f in FIGURES}
    version = None
    for rnd, line in rounds_of(text):
        if not line.startswith(prefix + " "):
            continue
        v = re.search(version_key + r"=(\d+)", line)
        if v:
            version = v.group(1)
        for figure, key in C_KEYS.items():
            for found in re.findall(re.escape(key) + r"=([0-9.]+)", line):
                values[figure].append((rnd, float(found)))
    return values, version


def rounds_seen(text):
    return sorted({int(m.group(1)) for m in map(ROUND.match, text.splitlines()) if m})


def paired(ours, ref):
    """Ratios ours/C of the rounds in which both have a value (each round once)."""
    by_round = {}
    for rnd, v in ref:
        if rnd is not None:
            by_round.setdefault(rnd, []).append(v)
    out = []
    for rnd, v in ours:
        if rnd is not None and isinstance(v, float) and len(by_round.get(rnd, ())) == 1:
            out.append(v / by_round[rnd][0])
    return out


def med(values):
    return statistics.median(values) if values else None


def num(value, width, digits=3):
    return f"{value:>{width}.{digits}f}" if value is not None else f"{'-':>{width}}"


def spread(values, width, digits=3):
    if not values:
        return f"{'-':>{width}}"
    return f"{f'{min(values):.{digits}f}..{max(values):.{digits}f}':>{width}}"


def text_cell(value, width):
    text = value if value else "-"
    if len(text) > width:
        text = text[: width - 3] + "..."
    return f"{text:>{width}}"


def version_name(v):
    """13000 -> 13.0, 12090 -> 12.9."""
    if not v:
        return "?"
    n = int(v)
    return f"{n // 1000}.{n % 1000 // 10}"


def table(ours, refs, peer, rounds):
    """The table's lines; refs maps 'drv'/'rt' to {figure: [(round, value)]}."""
    header = (
        f"{'figure':<16} {'ours: target api':<18} {'n':>3} {'ours us':>8} {'ours min..max':>13} "
        f"{'C drv us':>8} {'C drv min..max':>14} {'C rt us':>8} {'C rt min..max':>14} "
        f"{'cuda-python us':>20} {'vs':>5} {'ours/C':>6} {'rounds ours/C':>13}  goal"
    )
    lines = [header, "-" * len(header)]
    order = []
    grouped = {}
    for rnd, target, api, figure, value in ours:
        key = (target, api, figure)
        if key not in grouped:
            order.append(key)
            grouped[key] = []
        grouped[key].append((rnd, value))
    notes = []
    straddles = False
    for figure in FIGURES:
        keys = [k for k in order if k[2] == figure] or [("(none)", "", figure)]
        peer_value = next((r[4] for r in peer if r[3] == figure), "-" if figure == "B3" else "no result")
        c_cells = ""
        for ref in ("drv", "rt"):
            vals = [v for _, v in refs[ref][figure]]
            c_cells += f" {num(med(vals), 8)} {spread(vals, 14)}"
        peer_cell = num(peer_value, 20) if isinstance(peer_value, float) else text_cell(peer_value, 20)
        for target, api, _ in keys:
            got = grouped.get((target, api, figure), [])
            values = [v for _, v in got if isinstance(v, float)]
            failed = [v for _, v in got if not isinstance(v, float)]
            n = f"{len(values)}" + (f"/{rounds}" if rounds and len(values) != rounds else "")
            n = n if got else "-"
            if values:
                ours_cells = f"{num(med(values), 8)} {spread(values, 13)}"
            else:
                ours_cells = f"{text_cell(failed[0] if failed else 'no result', 8)} {spread([], 13)}"
            if failed:
                notes.append(
                    f"ours {target} {api} {figure}: {len(failed)} of {len(got)} runs failed: {failed[0]}"
                )
            ref = REFERENCE.get(api)
            ratio, rounds_ratio, verdict = "-", "-", ""
            c_ref = refs[ref][figure] if ref else []
            c_med = med([v for _, v in c_ref])
            if values and c_med:
                r = med(values) / c_med
                ratio = f"{r:.3f}"
                pairs = paired(got, c_ref)
                if pairs:
                    rounds_ratio = f"{min(pairs):.3f}..{max(pairs):.3f}"
                goal = GOAL.get(api)
                if goal:
                    verdict = f"{'ok' if r <= goal else 'OVER'} (<= {goal:.2f})"
                    if pairs and min(pairs) <= goal < max(pairs):
                        verdict += " ~"
                        straddles = True
            lines.append(
                f"{figure + ' ' + UNITS[figure]:<16} {target + ' ' + api:<18} {n:>3} {ours_cells}"
                f"{c_cells} {peer_cell} {('C ' + ref) if ref else '-':>5} {ratio:>6} "
                f"{rounds_ratio:>13}  {verdict}"
            )
    return lines, notes, straddles


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ours", help="log of the bench executable's runs (all rounds)")
    ap.add_argument("--c", help="log of the C driver-API reference's runs (all rounds)")
    ap.add_argument("--crt", help="log of the C runtime-API reference's runs (all rounds)")
    ap.add_argument("--peer", help="log of bench/peer_cuda_python.py")
    ap.add_argument("--machine", help="a file describing the GPU and driver (nvidia-smi)")
    ap.add_argument("--setup", help="one line saying how the rounds ran (order, pinning)")
    args = ap.parse_args()

    ours_text = read(args.ours)
    ours = results(ours_text)
    c_drv, driver = c_runs(read(args.c), "c", "driver")
    c_rt, runtime = c_runs(read(args.crt), "crt", "runtime")
    refs = {"drv": c_drv, "rt": c_rt}
    peer = [r for r in results(read(args.peer)) if r[1] == "cuda-python"]
    rounds = len(rounds_seen(ours_text))

    machine = read(args.machine).strip()
    if machine:
        print(f"machine: {' | '.join(machine.splitlines())}")
    if args.setup:
        print(f"setup: {args.setup}")
    runs = {k: max((len(v) for v in refs[k].values()), default=0) for k in refs}
    of = f" in {rounds} rounds" if rounds else ""
    print(
        f"C driver reference (hostcb_c.c, libcuda, cuDriverGetVersion {driver or '?'}): "
        f"{runs['drv']} runs{of}; C runtime reference (hostcb_c_runtime.c, libcudart "
        f"{version_name(runtime) if runtime else '?'}): {runs['rt']} runs{of}"
    )
    print("host-callback cost in microseconds (lower is better)")
    lines, notes, straddles = table(ours, refs, peer, rounds)
    print("\n".join(lines))
    print(
        "n: rounds with a value; us: median over the rounds (ours: one timed repetition a round, "
        "after its warm-up); min..max: the spread over the rounds"
    )
    print(
        "vs: the C reference of ours/C: 'C drv' (driver API, hostcb_c.c) for driver and safe rows, "
        "'C rt' (runtime API, hostcb_c_runtime.c) for runtime rows"
    )
    print(
        "ours/C: median of ours / median of that C; rounds ours/C: min..max of ours/C within "
        "each round (ours and C run back to back)"
    )
    if straddles:
        print("~: the rounds' ratios lie on both sides of the goal: the verdict is within the noise")
    if any(r[1] == "ctk_12_9" and r[2] == "runtime" for r in ours):
        print(
            f"note: the ctk_12_9 runtime rows load libcudart.so.12 (12.9, .gpu/lib), while the C "
            f"runtime reference links libcudart {version_name(runtime) if runtime else '13.x'}: their "
            f"ours/C includes the difference between the two libraries"
        )
    for note in notes:
        print(note)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
