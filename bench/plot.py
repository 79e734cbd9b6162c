#!/usr/bin/env python3
"""plot.py — draw the benchmark plots from results/bench.json.

Usage: plot.py RESULTS_DIR

Writes forward.png, input.png, sets.png, ddos.png, progrun.png,
update.png, classbench.png and ct-conns.png, ct-ddos.png, ct-synflood.png (connection
tracking) next to bench.json (only those whose section the report has).
Error bars span the minimum and maximum of the repetitions; the markers are
medians. Needs matplotlib (Debian: python3-matplotlib, installed by
bench/run.sh).
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # no display
import matplotlib.pyplot as plt  # noqa: E402

# One colour and marker per firewall, the same in every plot.
STYLE = {
    "xfw": ("tab:red", "o"),
    "xfw-set": ("darkred", "X"),
    "iptables-legacy": ("tab:blue", "s"),
    "iptables-nft": ("tab:green", "^"),
    "nftables": ("tab:purple", "D"),
    "ipset": ("tab:orange", "v"),
    "nft-set": ("tab:brown", "P"),
}
DPI = 110
SIZE = (11, 4.2)


def series(section, fw, key):
    """Return xs, medians, lower and upper error lengths of fw's points."""
    xs, med, lo, hi = [], [], [], []
    for p in section["series"]:
        if p["firewall"] != fw or p.get("error") or not p[key]["n"]:
            continue
        s = p[key]
        xs.append(p["x"])
        med.append(s["median"])
        lo.append(s["median"] - s["min"])
        hi.append(s["max"] - s["median"])
    return xs, med, lo, hi


def throughput_plot(section, path, xlabel, ylabel, machine, ns_panel=True, ylog=True,
                    ns_label="fw CPU time per delivered packet (ns)"):
    """Rate (and fw CPU per packet) against x, log axes."""
    ncols = 2 if ns_panel else 1
    fig, axes = plt.subplots(1, ncols, figsize=SIZE if ns_panel else (6.5, 4.2), squeeze=False)
    panels = [("pps", ylabel)]
    if ns_panel:
        panels.append(("ns_per_pkt", ns_label))
    for ax, (key, label) in zip(axes[0], panels):
        for fw in section["firewalls"]:
            xs, med, lo, hi = series(section, fw, key)
            if not xs:
                continue
            colour, marker = STYLE.get(fw, ("black", "x"))
            ax.errorbar(xs, med, yerr=[lo, hi], label=fw, color=colour, marker=marker, capsize=3, linewidth=1.5)
        ax.set_xscale("symlog", linthresh=max(1, min([x for x in section["xs"] if x > 0] or [1])))
        if ylog or key != "pps":
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"{section['title']}\n{machine}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def progrun_plot(sec, path, machine):
    """xfw_xdp ns per packet against rules, per case."""
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for case, colour in (("first", "tab:green"), ("last", "tab:red"), ("none", "tab:blue")):
        xs, med, lo, hi = [], [], [], []
        for row in sec["rows"]:
            for c in row.get("cases") or []:
                if c["name"] == case:
                    xs.append(row["rules"])
                    med.append(c["ns"]["median"])
                    lo.append(c["ns"]["median"] - c["ns"]["min"])
                    hi.append(c["ns"]["max"] - c["ns"]["median"])
        ax.errorbar(xs, med, yerr=[lo, hi], label=f"xfw, {case} rule matches" if case != "none" else "xfw, no rule matches",
                    color=colour, marker="o", capsize=3)
    ax.plot([2048], [13700], marker="*", markersize=12, linestyle="none", color="black",
            label="bpfilter 13.7 µs at 2,048 rules (issue #5)")
    ax.set_xscale("symlog", linthresh=50)
    ax.set_yscale("log")
    ax.set_xlabel("5-tuple rules")
    ax.set_ylabel("ns per packet (BPF_PROG_TEST_RUN)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"xfw_xdp per-packet cost\n{machine}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def classbench_plot(sec, path, machine):
    """Forwarding rate and fw CPU per packet per ClassBench set and firewall,
    and xfw_xdp's cost over the trace."""
    sets = [s for s in sec.get("sets") or [] if s.get("forward")]
    if not sets:
        return
    fws = [p["firewall"] for p in sets[0]["forward"]]
    fig, (ax, axc, ax2) = plt.subplots(1, 3, figsize=(15, 4.6), gridspec_kw={"width_ratios": [3, 3, 1.3]})
    width = 0.8 / len(fws)
    extra = {"none": ("grey", ""), "xfw, no rules": ("salmon", ""), "nftables (rule list)": ("tab:purple", ""),
             "nftables (interval set)": ("tab:brown", "")}
    for axis, key, label in ((ax, "pps", "packets/s forwarded (trace)"), (axc, "ns_per_pkt", "fw CPU ns per forwarded packet")):
        for k, fw in enumerate(fws):
            xs, med, lo, hi = [], [], [], []
            for i, s in enumerate(sets):
                p = next((p for p in s["forward"] if p["firewall"] == fw), None)
                if not p or p.get("error") or not p[key]["n"]:
                    continue
                xs.append(i + (k - (len(fws) - 1) / 2) * width)
                med.append(p[key]["median"])
                lo.append(p[key]["median"] - p[key]["min"])
                hi.append(p[key]["max"] - p[key]["median"])
            colour = (STYLE.get(fw) or extra.get(fw) or ("black", ""))[0]
            axis.bar(xs, med, width, yerr=[lo, hi], label=fw, color=colour, capsize=2)
        axis.set_xticks(range(len(sets)))
        axis.set_xticklabels([s["set"] for s in sets], fontsize=8)
        axis.set_yscale("log")
        axis.set_ylabel(label)
        axis.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=7)
    cost = [s for s in sets if s["ns"]["n"]]
    for off, key, colour, label in ((-0.2, "ns", "tab:red", "×16 per call"), (0.2, "ns_once", "lightcoral", "×1 per call")):
        st = [s.get(key) or {"median": 0, "min": 0, "max": 0} for s in cost]
        ax2.bar([i + off for i in range(len(st))], [n["median"] for n in st], 0.4,
                yerr=[[n["median"] - n["min"] for n in st], [n["max"] - n["median"] for n in st]],
                color=colour, capsize=2, label=label)
    ax2.axhline(200, color="black", linestyle="--", linewidth=1, label="200 ns")
    ax2.set_xticks(range(len(cost)))
    ax2.set_xticklabels([s["set"] for s in cost], fontsize=7, rotation=45)
    ax2.set_ylabel("xfw_xdp ns/packet (BPF_PROG_TEST_RUN)")
    ax2.grid(True, axis="y", alpha=0.3)
    ax2.legend(fontsize=7)
    fig.suptitle(f"ClassBench filter sets in FORWARD (trace drawn from the rules)\n{machine}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def update_plot(sec, path, machine):
    """Append and restore latency against ruleset size."""
    fig, axes = plt.subplots(1, 2, figsize=SIZE)
    for ax, key, title in ((axes[0], "append", "append rule n+1"), (axes[1], "restore", "restore n rules")):
        fws = []
        for p in sec[key]:
            if p["firewall"] not in fws:
                fws.append(p["firewall"])
        for fw in fws:
            pts = [p for p in sec[key] if p["firewall"] == fw and p["seconds"]["n"] and not p.get("error")]
            if not pts:
                continue
            xs = [p["n"] for p in pts]
            med = [p["seconds"]["median"] for p in pts]
            lo = [p["seconds"]["median"] - p["seconds"]["min"] for p in pts]
            hi = [p["seconds"]["max"] - p["seconds"]["median"] for p in pts]
            colour, marker = STYLE.get(fw, ("black", "x"))
            ax.errorbar(xs, med, yerr=[lo, hi], label=fw, color=colour, marker=marker, capsize=3)
        ax.set_xscale("symlog", linthresh=100)
        ax.set_yscale("log")
        ax.set_xlabel("rules in the chain (n)")
        ax.set_ylabel("seconds (wall time of the command)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Rule update latency\n{machine}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def synflood_plot(sec, path, machine):
    """Stream throughput and new connections/s without and under flood."""
    res = [r for r in sec["results"] if not r.get("error")]
    fig, axes = plt.subplots(1, 2, figsize=SIZE)
    width = 0.38
    for ax, (before, during, label) in zip(axes, (
            ("stream_gbps_before", "stream_gbps_during", "long-lived stream (Gbit/s)"),
            ("conns_before", "conns_during", "new connections/s"))):
        for i, (key, name, alpha) in enumerate(((before, "no flood", 0.45), (during, "under SYN flood", 1.0))):
            xs = [j + (i - 0.5) * width for j in range(len(res))]
            med = [r[key]["median"] for r in res]
            lo = [r[key]["median"] - r[key]["min"] for r in res]
            hi = [r[key]["max"] - r[key]["median"] for r in res]
            colours = [STYLE.get(r["firewall"], ("black", "x"))[0] for r in res]
            ax.bar(xs, med, width, yerr=[lo, hi], color=colours, alpha=alpha, capsize=3,
                   label=name, edgecolor="black", linewidth=0.5)
        ax.set_xticks(range(len(res)))
        ax.set_xticklabels([f'{r["firewall"]}\n{r["rate"] // 1000}k SYN/s' if r["rate"] else f'{r["firewall"]}\nmax' for r in res],
                           fontsize=7, rotation=30, ha="right")
        ax.set_ylabel(label)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"SYN flood from spoofed sources (pale: no flood)\n{machine}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    with open(os.path.join(out, "bench.json")) as f:
        rep = json.load(f)
    m = rep.get("machine", {})
    machine = f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores, kernel {m.get('kernel', '?')}"
    if rep.get("forward"):
        throughput_plot(rep["forward"], os.path.join(out, "forward.png"), "5-tuple rules (FORWARD)", "packets/s delivered", machine)
    if rep.get("input"):
        throughput_plot(rep["input"], os.path.join(out, "input.png"), "5-tuple rules (INPUT)", "packets/s delivered", machine)
    if rep.get("sets"):
        throughput_plot(rep["sets"], os.path.join(out, "sets.png"), "blocked source addresses", "packets/s delivered", machine)
    if rep.get("ddos"):
        throughput_plot(rep["ddos"], os.path.join(out, "ddos.png"), "attack rate (frames/s offered)",
                        "legitimate transactions/s", machine, ns_panel=False, ylog=False)
    if rep.get("progrun"):
        progrun_plot(rep["progrun"], os.path.join(out, "progrun.png"), machine)
    if rep.get("update"):
        update_plot(rep["update"], os.path.join(out, "update.png"), machine)
    if rep.get("classbench"):
        classbench_plot(rep["classbench"], os.path.join(out, "classbench.png"), machine)
    ct = rep.get("conntrack") or {}
    if ct.get("conn_rate"):
        throughput_plot(ct["conn_rate"], os.path.join(out, "ct-conns.png"), "filler rules before the NEW rule (INPUT)",
                        "connections/s completed", machine, ylog=False, ns_label="fw CPU time per connection (ns)")
    if ct.get("ddos"):
        throughput_plot(ct["ddos"], os.path.join(out, "ct-ddos.png"), "attack rate (frames/s offered)",
                        "legitimate transactions/s", machine, ns_panel=False, ylog=False)
    if ct.get("syn_flood"):
        synflood_plot(ct["syn_flood"], os.path.join(out, "ct-synflood.png"), machine)


if __name__ == "__main__":
    main()
