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
R, O = sys.argv[1], sys.argv[2]
def w(name, docs, queries, rels):
    d = os.path.join(O, name); os.makedirs(d, exist_ok=True)
    N = name.upper()
    with open(os.path.join(d, N + ".ALL"), "w") as f:
        for i, (t, body) in sorted(docs.items()):
            f.write(".I %d\n" % i)
            if t: f.write(".T\n%s\n" % " ".join(t.split()))
            f.write(".W\n%s\n" % " ".join(body.split()))
    with open(os.path.join(d, N + ".QRY"), "w") as f:
        for i, q in sorted(queries.items()):
            f.write(".I %d\n.W\n%s\n" % (i, " ".join(q.split())))
    with open(os.path.join(d, N + ".REL"), "w") as f:
        for q, ds in sorted(rels.items()):
            for x in sorted(ds): f.write("%d %d 0 0.000000\n" % (q, x))
# MED: SMART already.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); import eval as e  # noqa: E402
recs = e.smart_records(R + "/MED.ALL")
docs = {i: ("", r.get("W", "")) for i, r in recs.items()}
qs = {i: r.get("W", "") for i, r in e.smart_records(R + "/MED.QRY").items()}
rels = {}
for line in open(R + "/MED.REL"):
    p = line.split()
    if len(p) >= 2: rels.setdefault(int(p[0]), set()).add(int(p[1]))
w("med", docs, qs, rels)
# TIME: *TEXT records numbered by order; *FIND n queries; REL q d d d.
text = open(R + "/TIME.ALL", encoding="latin-1").read()
parts = re.split(r"^\*TEXT[^\n]*\n", text, flags=re.M)[1:]
docs = {i + 1: ("", p.split("*STOP")[0]) for i, p in enumerate(parts)}
qt = open(R + "/TIME.QUE", encoding="latin-1").read().split("*STOP")[0]
qs = {int(m.group(1)): m.group(2) for m in re.finditer(r"^\*FIND\s+(\d+)\s*\n(.*?)(?=^\*FIND|\Z)", qt, re.M | re.S)}
rels = {}
for line in open(R + "/TIME.REL"):
    p = line.split()
    if len(p) >= 2: rels[int(p[0])] = set(map(int, p[1:]))
w("time", docs, qs, rels)
# LISA: "Document N", title up to the first blank line, abstract, a line of stars.
docs = {}
for f in sorted(glob.glob(R + "/LISA[0-9]*")):
    for rec in open(f, encoding="latin-1").read().split("********************************************"):
        m = re.search(r"Document\s+(\d+)\s*\n(.*)", rec, re.S)
        if not m: continue
        i = int(m.group(1)); body = m.group(2)
        parts2 = re.split(r"\n[ \t\r]*\n", body.replace("\r", "").strip("\n"), maxsplit=1); t, ab = parts2[0], (parts2[1] if len(parts2) > 1 else "")
        if i not in docs: docs[i] = (t, ab)
qs = {}
for m in re.finditer(r"(?:^|\n)(\d+)\n(.*?)#", open(R + "/LISA.QUE", encoding="latin-1").read(), re.S):
    qs[int(m.group(1))] = m.group(2)
nums = open(R + "/LISARJ.NUM").read().split()
rels, k = {}, 0
while k < len(nums):
    q, n = int(nums[k]), int(nums[k + 1]); rels[q] = set(map(int, nums[k + 2:k + 2 + n])); k += 2 + n
w("lisa", docs, qs, rels)
for n in ("med", "time", "lisa"):
    nn, qq, rr, _ = e.load_smart(os.path.join(O, n), n.upper())
    print(n, len(nn), "notes", len(qq), "queries", sum(map(len, rr.values())), "pairs")
