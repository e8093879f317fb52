#!/usr/bin/env python3
"""How much term proximity could add to mirai's lexical ranking: re-ranks the default's
top 100 notes per query with a proximity score added to mirai's own, on every collection
of the development set, and prints each variant's nDCG@10 as a ratio to the collection's
best lexical peer (as eval.py's summary does).

The proximity scores are computed here, in Python, from each note's words (mirai's stop
list, read from src/index/tokenizer.rs, and the Snowball English stemmer mirai uses);
nothing in mirai computes them. Three families, each added to mirai's score with a weight:

  sdm      the sequential dependence model's two features (Metzler and Croft 2005) for
           each pair of consecutive query terms: ordered (adjacent, in order) and
           unordered (within W words), each saturated as BM25's tf and weighted by the
           rarer term's idf; positions with stop words removed (`c`) or counted (`f`)
  tp       BM25TP (Buettcher et al. 2006): for neighbouring occurrences of two different
           query terms, the other's idf over the squared distance, saturated per term
  mindist  the closest pair of distinct query terms (Tao and Zhai 2007),
           log(0.3 + exp(-d)), scaled by the query's top score

Usage: IR_EVAL_EXTRA=DIR python3 proximity.py [COLLECTION ...]   (default: the development set)
Needs what eval.py needs (`cargo build --release --example rank`; bm25s, PyStemmer, tantivy).
"""

import collections
import itertools
import math
import os
import re
import subprocess
import sys
import tempfile

import Stemmer

import eval as E

with open(os.path.join(E.CRATE, "src", "index", "tokenizer.rs")) as _fh:
    _src = _fh.read()
_block = _src[_src.index("const STOP_WORDS"):]
STOP = set(re.findall(r'"([^"]+)"', _block[:_block.index("];")]))
STEM = Stemmer.Stemmer("english")
WORD = re.compile(r"[^\W_]+")


def words(text):
    """The note's words in order: a stem, or None for a stop word (it keeps its place)."""
    return [None if w in STOP else STEM.stemWord(w) for w in WORD.findall(text.lower())]


def mirai_default(notes, queries):
    """{qid: [(path, score)]}: the default's notes in rank order, each at its best chunk."""
    with tempfile.TemporaryDirectory() as folder:
        for path, text in notes.items():
            with open(os.path.join(folder, path), "w", encoding="utf-8") as fh:
                fh.write(text)
        qfile = os.path.join(folder, ".queries.tsv")
        with open(qfile, "w") as fh:
            for qid, q in queries:
                fh.write("%s\t%s\n" % (qid, q.replace("\t", " ")))
        target = os.environ.get("CARGO_TARGET_DIR", os.path.join(E.CRATE, "target"))
        exe = os.environ.get("RANK_BIN") or os.path.join(target, "release", "examples", "rank")
        out = subprocess.run([exe, folder, qfile, str(E.DEPTH), "mirai"], check=True,
                             stdout=subprocess.PIPE, text=True).stdout
    runs = collections.defaultdict(list)
    for line in out.splitlines():
        _name, qid, _rank, path, _chunk, score = line.split("\t")
        if all(p != path for p, _ in runs[qid]):
            runs[qid].append((path, float(score)))
    return runs


def best_peer(notes, queries, rel):
    return max(sum(E.graded(run.get(qid, []), rel[qid])[0] for qid, _ in queries) / len(queries)
               for run in E.peer_runs(notes, queries).values())


def prepare(name):
    """Per query: its stems in order, their idf, and the candidates (path, mirai's score,
    positions of each query stem with stop words counted, and with them removed)."""
    notes, queries, rel, _exclude = E.COLLECTIONS[name]()
    runs = mirai_default(notes, queries)
    tokens = {p: words(t) for p, t in notes.items()}
    df = collections.Counter()
    for ws in tokens.values():
        df.update(set(w for w in ws if w))
    n, prepared = len(notes), []
    for qid, q in queries:
        seq = [w for w in words(q) if w]
        idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in seq}
        cands = []
        for path, score in runs.get(qid, []):
            full, kept = collections.defaultdict(list), collections.defaultdict(list)
            i = 0
            for j, w in enumerate(tokens[path]):
                if w:
                    if w in idf:
                        full[w].append(j)
                        kept[w].append(i)
                    i += 1
            cands.append((path, score, {"f": full, "c": kept}))
        prepared.append((seq, idf, cands, rel[qid]))
    return prepared, best_peer(notes, queries, rel)


def sat(x, k=1.2):
    return x * (k + 1) / (x + k)


def sdm(seq, idf, pos, window):
    ordered = unordered = 0.0
    for a, b in dict.fromkeys((a, b) for a, b in zip(seq, seq[1:]) if a != b):
        pa, pb = pos.get(a), pos.get(b)
        if pa and pb:
            after = set(pb)
            ordered += min(idf[a], idf[b]) * sat(sum(1 for p in pa if p + 1 in after))
            near = sum(1 for p in pa if any(abs(p - q) < window for q in pb))
            unordered += min(idf[a], idf[b]) * sat(near)
    return ordered, unordered


def tp(seq, idf, pos, k=1.2):
    occ = sorted((p, t) for t in set(seq) for p in pos.get(t, []))
    acc = collections.defaultdict(float)
    for (p1, t1), (p2, t2) in zip(occ, occ[1:]):
        if t1 != t2:
            acc[t1] += idf[t2] / (p2 - p1) ** 2
            acc[t2] += idf[t1] / (p2 - p1) ** 2
    return sum(min(1.0, idf[t]) * a * (k + 1) / (a + k) for t, a in acc.items())


def mindist(seq, pos):
    present = [t for t in set(seq) if pos.get(t)]
    if len(present) < 2:
        return 0.0
    d = min(abs(p - q) for a, b in itertools.combinations(present, 2) for p in pos[a] for q in pos[b])
    return math.log(0.3 + math.exp(-d)) - math.log(0.3)


def variants():
    yield "mirai (default)", lambda seq, idf, c, top: c[1]
    for kind in ("c", "f"):
        for window in (4, 8, 12):
            for wo, wu in ((0.05, 0.05), (0.1, 0.0), (0.2, 0.0), (0.0, 0.1), (0.1, 0.1), (0.2, 0.2)):
                def f(seq, idf, c, top, kind=kind, window=window, wo=wo, wu=wu):
                    o, u = sdm(seq, idf, c[2][kind], window)
                    return c[1] + wo * o + wu * u
                yield "sdm %s W%d o%.2f u%.2f" % (kind, window, wo, wu), f
        for w in (0.1, 0.2, 0.5):
            yield "tp %s %.1f" % (kind, w), (
                lambda seq, idf, c, top, kind=kind, w=w: c[1] + w * tp(seq, idf, c[2][kind]))
        for w in (0.02, 0.05, 0.1):
            yield "mindist %s %.2f" % (kind, w), (
                lambda seq, idf, c, top, kind=kind, w=w: c[1] + w * top * mindist(seq, c[2][kind]))


def main():
    names = sys.argv[1:] or E.DEV_SET
    data = {}
    for name in names:
        data[name] = prepare(name)
        print("%s: prepared" % name, file=sys.stderr)
    print("| variant | " + " | ".join(names) + " | worst | geomean |")
    print("| --- | " + " | ".join("---" for _ in names) + " | --- | --- |")
    for label, score in variants():
        ratios = []
        for name in names:
            prepared, best = data[name]
            total = 0.0
            for seq, idf, cands, rel in prepared:
                if cands:
                    top = cands[0][1]
                    order = sorted(cands, key=lambda c: -score(seq, idf, c, top))
                    total += E.graded([c[0] for c in order], rel)[0]
            ratios.append(total / len(prepared) / best)
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print("| %s | %s | %.3fx | %.3fx |" % (label, " | ".join("%.3fx" % r for r in ratios),
                                              min(ratios), geo), flush=True)


if __name__ == "__main__":
    main()
