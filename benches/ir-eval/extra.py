#!/usr/bin/env python3
"""MED, LISA and TIME, as found in public repositories (README.md says which), into the
compact form `eval.py` reads from $IR_EVAL_EXTRA/<name>/ (as data/npl: `.I`, optional `.T`,
`.W` on one line; `query doc 0 0.000000`).

Usage: python3 extra.py RAW_DIR OUT_DIR
  RAW_DIR holds MED.ALL, MED.QRY, MED.REL; TIME.ALL, TIME.QUE, TIME.REL; LISA0.001 ...
  LISA5.850, LISA.QUE, LISARJ.NUM. Writes OUT_DIR/med, OUT_DIR/lisa, OUT_DIR/time.
LISA: a document is `Document N`, its title up to the first blank line (blank lines may hold
spaces), its abstract, a line of stars; documents given twice are kept once; the judgments
come from LISARJ.NUM (query, count, documents). TIME: documents numbered by their order.
"""
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eval as ev  # noqa: E402  (the loader the evaluation itself uses)

STARS = "*" * 44


def write(out, name, docs, queries, rels):
    """One collection in the compact form: docs {id: (title, text)}, queries {id: text},
    rels {query: {doc, ...}}."""
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    stem = os.path.join(folder, name.upper())
    with open(stem + ".ALL", "w") as f:
        for i, (title, text) in sorted(docs.items()):
            f.write(".I %d\n" % i)
            if title:
                f.write(".T\n%s\n" % " ".join(title.split()))
            f.write(".W\n%s\n" % " ".join(text.split()))
    with open(stem + ".QRY", "w") as f:
        for i, q in sorted(queries.items()):
            f.write(".I %d\n.W\n%s\n" % (i, " ".join(q.split())))
    with open(stem + ".REL", "w") as f:
        for q, ds in sorted(rels.items()):
            for d in sorted(ds):
                f.write("%d %d 0 0.000000\n" % (q, d))


def pairs(path):
    """`query doc ...` lines (MED.REL: `query doc 1`; TIME.REL: `query doc doc ...`)."""
    rels = {}
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) >= 2:
                rels.setdefault(int(p[0]), set()).update(map(int, p[1:2] if path.endswith("MED.REL") else p[1:]))
    return rels


def med(raw):
    docs = {i: ("", r.get("W", "")) for i, r in ev.smart_records(os.path.join(raw, "MED.ALL")).items()}
    queries = {i: r.get("W", "") for i, r in ev.smart_records(os.path.join(raw, "MED.QRY")).items()}
    return docs, queries, pairs(os.path.join(raw, "MED.REL"))


def time_magazine(raw):
    with open(os.path.join(raw, "TIME.ALL"), encoding="latin-1") as f:
        parts = re.split(r"^\*TEXT[^\n]*\n", f.read(), flags=re.M)[1:]
    docs = {i + 1: ("", p.split("*STOP")[0]) for i, p in enumerate(parts)}
    with open(os.path.join(raw, "TIME.QUE"), encoding="latin-1") as f:
        text = f.read().split("*STOP")[0]
    queries = {int(m.group(1)): m.group(2)
               for m in re.finditer(r"^\*FIND\s+(\d+)\s*\n(.*?)(?=^\*FIND|\Z)", text, re.M | re.S)}
    return docs, queries, pairs(os.path.join(raw, "TIME.REL"))


def lisa(raw):
    docs = {}
    for path in sorted(glob.glob(os.path.join(raw, "LISA[0-9]*"))):
        with open(path, encoding="latin-1") as f:
            records = f.read().split(STARS)
        for rec in records:
            m = re.search(r"Document\s+(\d+)\s*\n(.*)", rec, re.S)
            if not m:
                continue
            head = re.split(r"\n[ \t\r]*\n", m.group(2).replace("\r", "").strip("\n"), maxsplit=1)
            docs.setdefault(int(m.group(1)), (head[0], head[1] if len(head) > 1 else ""))
    with open(os.path.join(raw, "LISA.QUE"), encoding="latin-1") as f:
        queries = {int(m.group(1)): m.group(2) for m in re.finditer(r"(?:^|\n)(\d+)\n(.*?)#", f.read(), re.S)}
    with open(os.path.join(raw, "LISARJ.NUM")) as f:
        nums = [int(x) for x in f.read().split()]
    rels, k = {}, 0
    while k < len(nums):
        q, n = nums[k], nums[k + 1]
        rels[q] = set(nums[k + 2:k + 2 + n])
        k += 2 + n
    return docs, queries, rels


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: extra.py RAW_DIR OUT_DIR")
    raw, out = sys.argv[1], sys.argv[2]
    for name, load in (("med", med), ("time", time_magazine), ("lisa", lisa)):
        write(out, name, *load(raw))
        notes, queries, rel, _ = ev.load_smart(os.path.join(out, name), name.upper())
        print(name, len(notes), "notes", len(queries), "queries", sum(map(len, rel.values())), "pairs")


if __name__ == "__main__":
    main()
