#!/usr/bin/python3
"""Scrapes a Prometheus endpoint and prints its samples as JSON, parsed by the Prometheus Python
client's own text-format parser (Debian's python3-prometheus-client), so a test checks the format
with a real parser and the values exactly.

Usage: /usr/bin/python3 prom_scrape.py URL [TOKEN_FILE] (Debian's interpreter, where the package lives)
Prints {"samples": [[name, {label: value}, value], ...], "families": {name: type}}.
Exit 1 (with the reason on stderr) when the endpoint does not answer 200 or does not parse.
"""
import json
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def main():
    url = sys.argv[1]
    request = urllib.request.Request(url)
    if len(sys.argv) > 2:
        with open(sys.argv[2], encoding="utf-8") as f:
            request.add_header("Authorization", "Bearer " + f.read().strip())
    with urllib.request.urlopen(request, timeout=20) as reply:
        content_type = reply.headers.get("Content-Type", "")
        text = reply.read().decode("utf-8")
    if not content_type.startswith("text/plain"):
        sys.exit(f"{url}: Content-Type {content_type!r}, want text/plain")
    samples, families = [], {}
    for family in text_string_to_metric_families(text):
        families[family.name] = family.type
        for s in family.samples:
            samples.append([s.name, s.labels, s.value])
    json.dump({"samples": samples, "families": families}, sys.stdout)


if __name__ == "__main__":
    main()
