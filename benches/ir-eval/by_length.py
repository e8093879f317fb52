#!/usr/bin/env python3
"""Chooses a query-length lever by the worst collection: from `eval.py --per-query FILE`,
ranks each query with variant LONG when it has at least T distinct indexed terms and
with variant SHORT below that (a query's ranking depends on its own length only, so this
is exactly what a default with that threshold ranks), for every T, and prints each
collection's nDCG@10 ratio to its best lexical peer, the smallest ratio and the geometric
mean; then each collection's query lengths.

With --bands, also every band (LONG for queries of LO to HI-1 terms): the band with the
largest worst ratio, and a leave-one-collection-out check of it (the band chosen on the
other collections, the left-out collection's ratio against SHORT alone), which says
whether a band chosen on some collections carries to another.

Usage: python3 by_length.py FILE SHORT LONG [--max-t N] [--bands]
  e.g. by_length.py /tmp/pq.json "mirai, no feedback" "mirai-lexical (default)"
"""

import argparse
import json
import math

PEERS = ["fts5-unicode61", "fts5-porter", "bm25s", "bm25s-stem", "tantivy"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("short", help="the variant for queries below the threshold")
    ap.add_argument("long", help="the variant for queries at or above it")
    ap.add_argument("--max-t", type=int, default=30)
    ap.add_argument("--bands", action="store_true")
    args = ap.parse_args()
    data = json.load(open(args.file))
    ndcg, terms = data["ndcg"], data["query_terms"]
    names = list(ndcg)
    best = {n: max(sum(ndcg[n][p].values()) / len(ndcg[n][p]) for p in PEERS) for n in names}
    print("| LONG from T terms | " + " | ".join(names) + " | worst | geomean |")
    print("| --- | " + " | ".join("---" for _ in names) + " | --- | --- |")
    for t in list(range(0, args.max_t + 1)) + [10**6]:
        ratios = []
        for n in names:
            short, long_ = ndcg[n][args.short], ndcg[n][args.long]
            mixed = [long_[q] if terms[n][q] >= t else short[q] for q in short]
            ratios.append(sum(mixed) / len(mixed) / best[n])
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        label = "never" if t == 10**6 else str(t)
        print("| %s | %s | %.3fx | %.3fx |" % (label, " | ".join("%.3fx" % r for r in ratios),
                                              min(ratios), geo))
    if args.bands:
        bands_report(ndcg, terms, names, best, args)
    print("\n| collection | queries | distinct indexed terms: min / quartile / median / quartile / max |")
    print("| --- | --- | --- |")
    for n in names:
        ts = sorted(terms[n].values())
        k = len(ts)
        print("| %s | %d | %d / %d / %d / %d / %d |"
              % (n, k, ts[0], ts[k // 4], ts[k // 2], ts[3 * k // 4], ts[-1]))


def bands_report(ndcg, terms, names, best, args):
    def ratio(n, lo, hi):
        short, long_ = ndcg[n][args.short], ndcg[n][args.long]
        mixed = [long_[q] if lo <= terms[n][q] < hi else short[q] for q in short]
        return sum(mixed) / len(mixed) / best[n]

    never = (10**6, 10**6 + 1)
    top = args.max_t + 10
    bands = [(lo, hi) for lo in range(top + 1) for hi in list(range(lo + 1, top + 1)) + [10**6]]
    bands.append(never)

    def chosen(among):
        return max(bands, key=lambda b: (min(ratio(n, *b) for n in among), b == never))

    def label(b):
        return "never" if b == never else "%d-%s" % (b[0], "" if b[1] == 10**6 else b[1] - 1)

    b = chosen(names)
    print("\nBest band by the worst collection, LONG for %s terms: %s (worst %.3fx; SHORT alone %.3fx)"
          % (label(b), " ".join("%s %.3fx" % (n, ratio(n, *b)) for n in names),
             min(ratio(n, *b) for n in names), min(ratio(n, *never) for n in names)))
    print("\n| left out | band chosen on the others | their worst | left out: band | left out: SHORT |")
    print("| --- | --- | --- | --- | --- |")
    for held in names:
        others = [n for n in names if n != held]
        b = chosen(others)
        print("| %s | %s | %.3fx | %.3fx | %.3fx |" % (held, label(b), min(ratio(n, *b) for n in others),
                                                      ratio(held, *b), ratio(held, *never)))


if __name__ == "__main__":
    main()
