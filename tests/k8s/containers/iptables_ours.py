#!/usr/bin/python3
"""Removes from `iptables-save` output what netavark added for one test network, nothing else.

  iptables-save | iptables_ours.py SUBNET_PREFIX BEFORE_FILE | iptables-restore

Gone: every rule naming the subnet (10.213.N.), the chains those rules jump to or live in
(netavark's per-network NETAVARK-<id> chains) with every rule of or into them, and, when no other
network's chain is left, netavark's shared chains (NETAVARK_FORWARD, NETAVARK-HOSTPORT-*) that
BEFORE_FILE (the state at the start) did not have. Other rules, other networks' too, stay.
"""
import re
import sys

PER_NETWORK = re.compile(r"NETAVARK-(DN-)?[0-9A-F]{6,}$")  # a chain of one network


def chain_of(rule):
    return rule.split()[1]


def targets(rule):
    return set(re.findall(r"-[jg] (\S+)", rule))


def declared(lines):
    return {l[1:].split()[0] for l in lines if l.startswith(":")}


def without(lines, chains):
    """`lines` without the rules of or into `chains` and without their declarations."""
    return [l for l in lines if not (l.startswith("-A ") and
                                     (chain_of(l) in chains or targets(l) & chains)) and
            not (l.startswith(":") and l[1:].split()[0] in chains)]


def main(prefix, before_path):
    with open(before_path) as f:
        before_chains = declared(f.read().splitlines())
    tables, table = [], None
    for line in sys.stdin.read().splitlines():
        if line.startswith("*"):
            table = [line]
        elif line == "COMMIT":
            tables.append(table)
        elif not line.startswith("#") and table is not None:
            table.append(line)
    rules = [l for t in tables for l in t if l.startswith("-A ")]
    ours = {r for r in rules if prefix in r}
    gone = {c for r in ours for c in targets(r) | {chain_of(r)} if PER_NETWORK.match(c)}
    tables = [[l for l in without(t, gone) if l not in ours] for t in tables]
    # No other network's chain left: netavark's shared chains made during the test go too.
    left = {c for t in tables for c in declared(t)}
    if not any(PER_NETWORK.match(c) for c in left):
        shared = {c for c in left if c.startswith("NETAVARK") and c not in before_chains}
        tables = [without(t, shared) for t in tables]
    print("\n".join(l for t in tables for l in t + ["COMMIT"]))


if __name__ == "__main__":
    main(*sys.argv[1:])
