#!/usr/bin/env python3
"""Known-item retrieval evaluation of mirai's lexical index against SQLite FTS5,
bm25s and tantivy, in one run, on the same notes and the same queries.

By default the queries are derived deterministically from the vault given with --notes (the figures in
README.md came from a real vault of 1,013 Dendron notes; a generated one:
`cargo run --release --example gen-notes -- --notes 2000 --out DIR`), in three sets, each query with exactly one relevant note:

  title   the note's front-matter title (titles shared by several notes skipped)
  anchor  the visible text of a wikilink `[[text|target]]`, relevant: the target
          note; the linking note is removed from every system's ranking
  sampled 4 words drawn (seeded) from the note's body, proportionally to their
          frequency in it, among words of 4+ letters (Azzopardi et al. 2007)

Every system ranks notes: the peers index whole notes (their natural setup);
mirai ranks chunks and a note takes the rank of its best chunk. Reported: nDCG@10
and MRR@100 per set and their mean over all queries.

With --collection it runs judged test collections instead (data/<name>, each with
its SOURCE.md; none named: the development set, CISI, ADI and their `-stubs`
variants, where every other document keeps only its title; with --notes too, the
vault's known items are one more collection): one note per document (title as the
first heading, abstract as body), every judged query, nDCG@10, P@10 and MAP@100
(binary relevance), a table per collection, then one of every variant's nDCG@10 on
each collection against that collection's best lexical peer and the geometric mean
of those ratios.

Usage: python3 eval.py --notes DIR [--per-set N] [--variants SPEC ...]
       python3 eval.py --collection [NAME ...] [--notes DIR] [--variants SPEC ...] [--summary-only]
Needs: pip install bm25s PyStemmer tantivy; `cargo build --release --example rank` (or
RANK_BIN naming another build of it).
"""

import argparse
import math
import os
import random
import re
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# Distinct indexed terms of each query of the last mirai run (the default
# variant's index): what a query-length lever (RM3's trigger) sees.
QUERY_TERMS = {}
CRATE = os.path.abspath(os.path.join(HERE, "..", ".."))
DEPTH = 100

DEFAULT_VARIANTS = [
    "mirai",
    "bm25-chunks:tw=0,nw=0,k1=1.2",
    "bm25-whole-notes:tw=0,nw=0,k1=1.2,pack=100000000,max=100000000",
    "no-title:tw=0",
    "no-note:nw=0",
    "no-stem:stem=0",
    "no-stop:stop=0",
    "no-fold:fold=0",
    "k1=1.2:k1=1.2",
    "b=0.6:b=0.6",
    "tw=2:tw=2",
    "nw=0.5:nw=0.5",
    "pack=3000:pack=3000,max=6000",
]


COLLECTION_VARIANTS = [
    "mirai-lexical (default)",
    "mirai-lexical, no feedback:fbd=0",
]
# With an embedding server configured (MIRAI_EMBED_BASE_URL, as for the server).
SEMANTIC_VARIANTS = [
    "mirai-semantic:mode=semantic",
    "mirai-hybrid-rrf:mode=hybrid,fusion=rrf",
    "mirai-hybrid (default):mode=hybrid",
]


def read_notes(root):
    notes = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for f in sorted(filenames):
            if f.startswith(".") or not f.lower().endswith(".md"):
                continue
            p = os.path.join(dirpath, f)
            rel = os.path.relpath(p, root)
            with open(p, encoding="utf-8", errors="strict") as fh:
                notes[rel] = fh.read()
    return notes


FM = re.compile(r"\A---\n(.*?)\n---\n", re.S)
WIKILINK = re.compile(r"\[\[([^\]|#\n]+)\|([^\]#\n]+)(?:#[^\]\n]*)?\]\]")
WORD = re.compile(r"[A-Za-z]{4,}")
COMMON = set("""
this that with from have will your what when which there their they them then
than been were into more also some such only over other about would could should
these those just like make made each many most much very here where while after
before being does doing dont note notes https http www com
""".split())


def front_matter(text):
    m = FM.match(text)
    if not m:
        return {}, text
    fields = {}
    for line in m.group(1).splitlines():
        if ":" in line and not line.startswith(" "):
            k, v = line.split(":", 1)
            fields[k.strip()] = v.strip().strip("'\"")
    return fields, text[m.end():]


def make_queries(notes, per_set, seed=1):
    rng = random.Random(seed)
    by_stem = {}
    for path in notes:
        by_stem[os.path.basename(path)[:-3]] = path
    titles = {}
    for path, text in notes.items():
        t = front_matter(text)[0].get("title", "")
        if t:
            titles.setdefault(t.lower(), []).append(path)
    title_q = [(t, ps[0], None) for t, ps in sorted(titles.items()) if len(ps) == 1 and WORD.search(t)]

    anchor_q = []
    seen = set()
    for path, text in sorted(notes.items()):
        for text_part, target in WIKILINK.findall(text):
            target = target.strip()
            q = text_part.strip()
            if target in by_stem and by_stem[target] != path and WORD.search(q):
                key = (q.lower(), target)
                if key not in seen:
                    seen.add(key)
                    anchor_q.append((q, by_stem[target], path))

    sampled_q = []
    for path, text in sorted(notes.items()):
        body = front_matter(text)[1]
        words = [w.lower() for w in WORD.findall(body)]
        words = [w for w in words if w not in COMMON]
        if len(words) < 40:
            continue
        r = random.Random("%d:%s" % (seed, path))
        picked = []
        for _ in range(20):
            w = r.choice(words)
            if w not in picked:
                picked.append(w)
            if len(picked) == 4:
                break
        sampled_q.append((" ".join(picked), path, None))

    sets = {}
    for name, qs in (("title", title_q), ("anchor", anchor_q), ("sampled", sampled_q)):
        qs = list(qs)
        rng.shuffle(qs)
        sets[name] = qs[:per_set]
    return sets


def metrics(ranked, relevant, exclude):
    ranked = [p for p in ranked if p != exclude]
    for i, p in enumerate(ranked[:DEPTH]):
        if p == relevant:
            ndcg = 1.0 / math.log2(i + 2) if i < 10 else 0.0
            return ndcg, 1.0 / (i + 1)
    return 0.0, 0.0


def dedupe(paths):
    seen, out = set(), []
    for p in paths:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def terms_only(q):
    # Lowercase, so a query's "AND"/"OR"/"NOT" are words, not operators.
    return [t.lower() for t in re.findall(r"\w+", q)]


def run_fts5(notes, queries, tokenize):
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE n USING fts5(path UNINDEXED, body, tokenize=%r)" % tokenize)
    db.executemany("INSERT INTO n VALUES (?, ?)", sorted(notes.items()))
    out = {}
    for qid, q in queries:
        toks = terms_only(q)
        if not toks:
            out[qid] = []
            continue
        match = " OR ".join('"%s"' % t.replace('"', '""') for t in toks)
        rows = db.execute(
            "SELECT path FROM n WHERE n MATCH ? ORDER BY bm25(n), path LIMIT ?", (match, DEPTH)
        ).fetchall()
        out[qid] = [r[0] for r in rows]
    return out


def run_bm25s(notes, queries, stem=True):
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english") if stem else None
    paths = sorted(notes)
    corpus = [notes[p] for p in paths]
    tok = bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(tok, show_progress=False)
    out = {}
    for qid, q in queries:
        qt = bm25s.tokenize([q], stopwords="en", stemmer=stemmer, show_progress=False)
        if not qt.vocab:
            out[qid] = []
            continue
        docs, scores = retriever.retrieve(qt, k=min(DEPTH, len(paths)), show_progress=False)
        out[qid] = [paths[int(d)] for d, s in zip(docs[0], scores[0]) if s > 0]
    return out


def run_tantivy(notes, queries):
    import tantivy

    sb = tantivy.SchemaBuilder()
    sb.add_text_field("path", stored=True, tokenizer_name="raw")
    sb.add_text_field("body", stored=False, tokenizer_name="en_stem")
    schema = sb.build()
    index = tantivy.Index(schema)
    writer = index.writer(heap_size=50_000_000, num_threads=1)
    for p, text in sorted(notes.items()):
        writer.add_document(tantivy.Document(path=p, body=text))
    writer.commit()
    index.reload()
    searcher = index.searcher()
    out = {}
    for qid, q in queries:
        toks = terms_only(q)
        if not toks:
            out[qid] = []
            continue
        query = index.parse_query(" ".join(toks), ["body"])
        hits = searcher.search(query, DEPTH).hits
        out[qid] = [searcher.doc(a)["path"][0] for _, a in hits]
    return out


def run_mirai(notes_dir, queries, variants):
    with tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False) as fh:
        for qid, q in queries:
            fh.write("%s\t%s\n" % (qid, q.replace("\t", " ").replace("\n", " ")))
        qfile = fh.name
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(CRATE, "target"))
    exe = os.environ.get("RANK_BIN") or os.path.join(target, "release", "examples", "rank")
    env = dict(os.environ)
    env.setdefault("RANK_VECTORS", os.path.join(tempfile.gettempdir(), "mirai-ir-eval-vectors-%s.bin"
                                                 % os.path.basename(notes_dir.rstrip("/"))))
    qlen_file = qfile + ".qlen"
    env["RANK_QLEN"] = qlen_file
    res = subprocess.run([exe, notes_dir, qfile, str(DEPTH)] + variants,
                         check=True, stdout=subprocess.PIPE, text=True, env=env)
    os.unlink(qfile)
    global QUERY_TERMS
    with open(qlen_file) as fh:
        QUERY_TERMS = {qid: int(n) for qid, n in (line.split("\t") for line in fh)}
    os.unlink(qlen_file)
    runs = {}
    for line in res.stdout.splitlines():
        name, qid, _rank, path, _chunk, _score = line.split("\t")
        runs.setdefault(name, {}).setdefault(qid, []).append(path)
    return {name: {qid: dedupe(ps) for qid, ps in run.items()} for name, run in runs.items()}


def smart_records(path):
    """A SMART-format file's `.I id` records as {id: {field letter: text}}."""
    records, current, field = {}, None, None
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            line = line.rstrip("\n")
            m = re.match(r"^\.([A-Z])(?:\s+(\d+))?\s*$", line)
            if m and m.group(1) == "I" and m.group(2):
                current = records.setdefault(int(m.group(2)), {})
                field = None
            elif m:
                field = m.group(1)
                if current is not None:
                    current.setdefault(field, "")
            elif current is not None and field:
                current[field] += line.strip() + "\n"
    return records


def load_smart(folder, stem, title_only=lambda i: False):
    """A SMART-format collection (`STEM.ALL`, `STEM.QRY`, `STEM.REL`): one note per
    document (`.T` as the note's first heading, `.W` as its body; only the title when
    `title_only(id)`), the queries with judgments, binary relevance."""
    docs = smart_records(os.path.join(folder, stem + ".ALL"))
    notes = {}
    for i, rec in sorted(docs.items()):
        title = " ".join(rec.get("T", "").split())
        body = "" if title_only(i) else rec.get("W", "").strip()
        if not title:
            # No title (NPL, MED, TIME): the note is its text, as a note without a heading.
            notes["d%04d.md" % i] = "%s\n" % body
            continue
        notes["d%04d.md" % i] = "# %s\n\n%s\n" % (title, body) if body else "# %s\n" % title
    qrecs = smart_records(os.path.join(folder, stem + ".QRY"))
    judged = {}
    with open(os.path.join(folder, stem + ".REL")) as fh:
        for line in fh:
            parts = line.split()
            if len(parts) >= 2:
                judged.setdefault(int(parts[0]), set()).add("d%04d.md" % int(parts[1]))
    queries = [("q%03d" % q, " ".join(qrecs[q].get("W", "").split())) for q in sorted(judged)]
    rel = {"q%03d" % q: paths for q, paths in judged.items()}
    return notes, queries, rel, {}


def slash_records(path):
    """A file of records each ending in a line holding `/` (NPL's original layout):
    [(number, text)], the number the record's first word, the text the rest, whitespace
    collapsed. Empty records are kept (an empty text)."""
    records, words = [], []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.strip() == "/":
                if words:
                    records.append((int(words[0]), " ".join(words[1:])))
                words = []
            else:
                words.extend(line.split())
    return records


def load_npl_original(folder):
    """NPL as distributed (`doc-text`, `query-text`, `rlv-ass`: number, text, `/`):
    the same notes, queries and judgments as the bundled compact form (data/npl), read
    from a folder given with `--collection-dir npl=DIR`."""
    notes = {"d%04d.md" % i: "%s\n" % text
             for i, text in slash_records(os.path.join(folder, "doc-text")) if text}
    qtext = dict(slash_records(os.path.join(folder, "query-text")))
    judged = {}
    for q, rest in slash_records(os.path.join(folder, "rlv-ass")):
        judged.setdefault(q, set()).update("d%04d.md" % int(d) for d in rest.split())
    queries = [("q%03d" % q, qtext[q]) for q in sorted(judged) if judged[q]]
    rel = {"q%03d" % q: paths for q, paths in judged.items() if paths}
    return notes, queries, rel, {}


def load_folder(folder):
    """A collection folder: NPL's original layout (`doc-text`), or the compact SMART form
    (`<NAME>.ALL`, `.QRY`, `.REL`, as data/<name>)."""
    if os.path.exists(os.path.join(folder, "doc-text")):
        return load_npl_original(folder)
    stems = [f[:-4] for f in sorted(os.listdir(folder)) if f.endswith(".ALL")]
    if len(stems) != 1:
        sys.exit("%s: neither doc-text nor exactly one <NAME>.ALL" % folder)
    return load_smart(folder, stems[0])


# The development collections (data/<name>, each with its SOURCE.md). `-stubs`
# variants keep only the title of every other document: the judgments are the
# originals', so they test how title-only notes (stubs, daily notes, link hubs)
# rank against full ones on real information needs.
COLLECTIONS = {
    "cisi": lambda: load_smart(os.path.join(HERE, "data", "cisi"), "CISI"),
    "adi": lambda: load_smart(os.path.join(HERE, "data", "adi"), "ADI"),
    "npl": lambda: load_smart(os.path.join(HERE, "data", "npl"), "NPL"),
    "cisi-stubs": lambda: load_smart(os.path.join(HERE, "data", "cisi"), "CISI", lambda i: i % 2 == 1),
    "adi-stubs": lambda: load_smart(os.path.join(HERE, "data", "adi"), "ADI", lambda i: i % 2 == 1),
}
# Collections kept outside the project (README.md says where they come from and
# why they are not bundled), in the same compact form: $IR_EVAL_EXTRA/<name>/<NAME>.ALL ...
EXTRA = ["med", "lisa", "time"]
EXTRA_DIR = os.environ.get("IR_EVAL_EXTRA", "")
for _name in EXTRA:
    if EXTRA_DIR and os.path.isdir(os.path.join(EXTRA_DIR, _name)):
        COLLECTIONS[_name] = (lambda n: lambda: load_smart(os.path.join(EXTRA_DIR, n), n.upper()))(_name)
DEV_SET = ["cisi", "adi", "npl", "cisi-stubs", "adi-stubs"] + [n for n in EXTRA if n in COLLECTIONS]
PEERS = ["fts5-unicode61", "fts5-porter", "bm25s", "bm25s-stem", "tantivy"]


def load_vault(notes_dir, per_set):
    """A vault's known-item sets (see `make_queries`) as a judged collection: one
    relevant note per query; an anchor query's linking note is left out of every
    ranking."""
    notes = read_notes(notes_dir)
    sets = make_queries(notes, per_set)
    queries, rel, exclude = [], {}, {}
    for name, qs in sets.items():
        for i, (q, target, excl) in enumerate(qs):
            qid = "%s-%d" % (name, i)
            queries.append((qid, q))
            rel[qid] = {target}
            if excl:
                exclude[qid] = excl
    return notes, queries, rel, exclude


def graded(ranked, relevant):
    """nDCG@10, P@10 and average precision at depth 100, binary relevance."""
    dcg = sum(1.0 / math.log2(i + 2) for i, p in enumerate(ranked[:10]) if p in relevant)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(10, len(relevant))))
    hits, ap = 0, 0.0
    for i, p in enumerate(ranked[:DEPTH]):
        if p in relevant:
            hits += 1
            ap += hits / (i + 1)
    p10 = sum(1 for p in ranked[:10] if p in relevant) / 10.0
    return dcg / ideal, p10, ap / len(relevant)


def peer_runs(notes, queries):
    """Every lexical peer's ranking of `queries` over `notes`: {peer: {qid: [path]}}, keyed as PEERS."""
    return {
        "fts5-unicode61": run_fts5(notes, queries, "unicode61 remove_diacritics 2"),
        "fts5-porter": run_fts5(notes, queries, "porter unicode61 remove_diacritics 2"),
        "bm25s": run_bm25s(notes, queries, stem=False),
        "bm25s-stem": run_bm25s(notes, queries, stem=True),
        "tantivy": run_tantivy(notes, queries),
    }


def score_collection(name, notes, queries, rel, exclude, variants, notes_dir=None):
    """Every mirai variant and every peer on one collection: {system: (nDCG@10, P@10, MAP@100)}."""
    if notes_dir:
        runs = run_mirai(notes_dir, queries, variants)
    else:
        with tempfile.TemporaryDirectory() as folder:
            for path, text in notes.items():
                os.makedirs(os.path.dirname(os.path.join(folder, path)), exist_ok=True)
                with open(os.path.join(folder, path), "w", encoding="utf-8") as fh:
                    fh.write(text)
            runs = run_mirai(folder, queries, variants)
    runs.update(peer_runs(notes, queries))
    table, per_query = {}, {}
    for system in [v.split(":")[0] for v in variants] + PEERS:
        ms = []
        for qid, _ in queries:
            ranked = [p for p in runs.get(system, {}).get(qid, []) if p != exclude.get(qid)]
            ms.append(graded(ranked, rel[qid]))
        table[system] = tuple(sum(m[k] for m in ms) / len(ms) for k in range(3))
        per_query[system] = {qid: m[0] for (qid, _), m in zip(queries, ms)}
    return table, per_query


def collection_run(args):
    for spec in args.collection_dir or []:
        name, _, folder = spec.partition("=")
        if not folder or not os.path.isdir(folder):
            sys.exit("--collection-dir NAME=DIR: %r names no folder" % spec)
        COLLECTIONS[name] = (lambda f: lambda: load_folder(f))(folder)
    names = (args.collection or ([] if args.collection_dir else DEV_SET)) + [
        s.partition("=")[0] for s in args.collection_dir or []]
    tables, per_query, query_terms = {}, {}, {}
    for name in names + (["vault"] if args.notes else []):
        if name == "vault":
            notes, queries, rel, exclude = load_vault(args.notes, args.per_set)
        else:
            notes, queries, rel, exclude = COLLECTIONS[name]()
        print("%s: %d notes, %d judged queries" % (name, len(notes), len(queries)), file=sys.stderr)
        # Chunk vectors are kept between runs (keyed by model and chunk text).
        # IR_EVAL_VECTORS names the folder (default: the temporary one).
        os.environ["RANK_VECTORS"] = os.path.join(
            os.environ.get("IR_EVAL_VECTORS") or tempfile.gettempdir(),
            "mirai-ir-eval-vectors-%s.bin" % name)
        tables[name], per_query[name] = score_collection(
            name, notes, queries, rel, exclude, args.variants, args.notes if name == "vault" else None)
        terms = sorted(QUERY_TERMS.values())
        query_terms[name] = dict(QUERY_TERMS)
        print("%s: distinct indexed query terms: median %d, quartiles %d-%d, min %d, max %d"
              % (name, terms[len(terms) // 2], terms[len(terms) // 4], terms[3 * len(terms) // 4],
                 terms[0], terms[-1]), file=sys.stderr)
    if args.per_query:
        import json
        with open(args.per_query, "w") as fh:
            json.dump({"ndcg": per_query, "query_terms": query_terms}, fh)
    systems = [v.split(":")[0] for v in args.variants]
    if not args.summary_only:
        for name, table in tables.items():
            best = max(PEERS, key=lambda p: table[p][0])
            print("\n## %s (best lexical peer: %s)\n" % (name, best))
            print("| system | nDCG@10 | P@10 | MAP@100 | nDCG vs %s |" % best)
            print("| --- | --- | --- | --- | --- |")
            for system, (nd, p10, ap) in table.items():
                print("| %s | %.4f | %.4f | %.4f | %.3fx |" % (system, nd, p10, ap, nd / table[best][0]))
    # Per variant: nDCG@10 on each collection, its ratio to that collection's best
    # peer, the geometric mean of the ratios, and the change against the first variant.
    print("\n## nDCG@10 by collection (ratio to the best lexical peer); the smallest ratio "
          "(what the default is chosen by), the geometric mean of the ratios\n")
    print("| variant | " + " | ".join(tables) + " | worst | geomean | worst vs first |")
    print("| --- | " + " | ".join("---" for _ in tables) + " | --- | --- | --- |")
    first = systems[0]
    for system in systems:
        cells, ratios, changes = [], [], []
        for name, table in tables.items():
            best = max(table[p][0] for p in PEERS)
            nd = table[system][0]
            ratios.append(nd / best)
            changes.append(nd / table[first][0] - 1.0)
            cells.append("%.4f (%.3fx)" % (nd, nd / best))
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print("| %s | %s | %.3fx | %.3fx | %+.1f%% |"
              % (system, " | ".join(cells), min(ratios), geo, 100 * min(changes)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes",
                    help="a folder of markdown notes (your vault, or one from the gen-notes example)")
    ap.add_argument("--collection", nargs="*", choices=sorted(COLLECTIONS),
                    help="test collections under data/ (none named: the whole development set); "
                         "with --notes, the vault's known items are one more")
    ap.add_argument("--collection-dir", nargs="*", metavar="NAME=DIR",
                    help="more collections from folders outside the project: NPL's original "
                         "layout (doc-text, query-text, rlv-ass) or the compact form of data/<name>")
    ap.add_argument("--summary-only", action="store_true",
                    help="print only the table of variants by collection")
    ap.add_argument("--per-set", type=int, default=300)
    ap.add_argument("--per-query", metavar="FILE",
                    help="with --collection: write every system's nDCG@10 per query and each "
                         "query's distinct indexed terms as JSON (for query-length levers)")
    ap.add_argument("--variants", nargs="*")
    args = ap.parse_args()
    if args.collection_dir and args.collection is None:
        args.collection = []
    if args.collection is not None:
        if not args.variants:
            args.variants = list(COLLECTION_VARIANTS)
            if os.environ.get("MIRAI_EMBED_BASE_URL"):
                args.variants += SEMANTIC_VARIANTS
        return collection_run(args)
    if not args.notes:
        ap.error("--notes DIR or --collection [NAME ...]")
    args.variants = args.variants or DEFAULT_VARIANTS

    notes = read_notes(args.notes)
    sets = make_queries(notes, args.per_set)
    queries, judged = [], {}
    for name, qs in sets.items():
        for i, (q, rel, excl) in enumerate(qs):
            qid = "%s-%d" % (name, i)
            queries.append((qid, q))
            judged[qid] = (name, rel, excl)
    print("notes: %d; queries: %s" % (len(notes), ", ".join("%s %d" % (k, len(v)) for k, v in sets.items())))

    runs = {}
    t = time.time()
    runs.update(run_mirai(args.notes, queries, args.variants))
    timing = {"mirai (all variants)": time.time() - t}
    for name, fn in (
        ("fts5-unicode61", lambda: run_fts5(notes, queries, "unicode61 remove_diacritics 2")),
        ("fts5-porter", lambda: run_fts5(notes, queries, "porter unicode61 remove_diacritics 2")),
        ("bm25s", lambda: run_bm25s(notes, queries, stem=False)),
        ("bm25s-stem", lambda: run_bm25s(notes, queries)),
        ("tantivy", lambda: run_tantivy(notes, queries)),
    ):
        t = time.time()
        runs[name] = fn()
        timing[name] = time.time() - t

    set_names = list(sets)
    header = "%-22s" % "system" + "".join("%16s" % ("%s nDCG/MRR" % s) for s in set_names) + "%16s" % "all nDCG/MRR"
    print(header)
    order = [v.split(":")[0] for v in args.variants] + PEERS
    for system in order:
        run = runs.get(system, {})
        per = {s: [] for s in set_names}
        for qid, (s, rel, excl) in judged.items():
            per[s].append(metrics(run.get(qid, []), rel, excl))
        allm = [m for s in set_names for m in per[s]]
        cells = []
        for s in set_names + ["all"]:
            ms = allm if s == "all" else per[s]
            nd = sum(m[0] for m in ms) / max(len(ms), 1)
            mrr = sum(m[1] for m in ms) / max(len(ms), 1)
            cells.append("%16s" % ("%.4f/%.4f" % (nd, mrr)))
        print("%-22s" % system + "".join(cells))
    print("seconds: " + ", ".join("%s %.1f" % kv for kv in timing.items()), file=sys.stderr)


if __name__ == "__main__":
    main()
