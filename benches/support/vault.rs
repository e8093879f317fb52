//! A synthetic notes vault, deterministic by seed: the workload of the benches,
//! the README's examples and the specs that need many notes.
//!
//! A vault looks like one a person keeps: nested folders (a fixed pool, plus
//! daily notes under `Daily/YYYY/MM`), file names with spaces or in kebab case,
//! YAML front matter on part of the notes, headings, paragraphs, lists and task
//! lists, `[[wikilinks]]` (plain, aliased, to a heading, embedded, by path, and
//! a few dangling), `#tags`, fenced code, tables and block quotes, some accented
//! Latin, CJK and emoji, occasional very long lines, some files without a final
//! newline and a few with CRLF line ends. Note sizes follow a fixed quantile
//! table (median about 2 KB, p90 about 8 KB, a long tail to 200 KB).
//!
//! Every note is generated from its own random stream (the seed and its
//! number), with `fastrand`'s seeded generator pinned by Cargo.lock, so the
//! same seed and options give byte-identical files. With `git`, the notes are
//! committed with git2 under a fixed author and date, so commit ids repeat too.

#![allow(dead_code)] // the example, the benches and the specs each use a part

use std::path::Path;

/// What to generate.
#[derive(Debug, Clone)]
pub struct Options {
    pub notes: usize,
    pub seed: u64,
    /// Notes with YAML front matter, per thousand.
    pub front_matter_permille: u32,
    /// Words that are wikilinks, per thousand.
    pub link_permille: u32,
    /// Notes with CRLF line ends, per thousand.
    pub crlf_permille: u32,
    /// Notes without a final newline, per thousand.
    pub no_eol_permille: u32,
    /// Largest note in bytes (the size table's tail is cut there).
    pub max_note_bytes: usize,
}

impl Options {
    /// `notes` notes from `seed`, with the defaults below.
    pub fn new(notes: usize, seed: u64) -> Options {
        Options {
            notes,
            seed,
            front_matter_permille: 600,
            link_permille: 30,
            crlf_permille: 10,
            no_eol_permille: 50,
            max_note_bytes: 200_000,
        }
    }
}

/// What was generated.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub notes: usize,
    pub bytes: u64,
    pub links: usize,
    pub folders: usize,
    pub median_bytes: usize,
    pub p90_bytes: usize,
    pub max_bytes: usize,
}

/// One generated note: where it goes and what it says.
pub struct Note {
    pub path: String,
    pub text: String,
}

const WORDS: &[&str] = &[
    "account",
    "agenda",
    "algorithm",
    "anchor",
    "archive",
    "audit",
    "backlog",
    "backup",
    "baseline",
    "batch",
    "benchmark",
    "branch",
    "budget",
    "buffer",
    "cache",
    "calendar",
    "cluster",
    "commit",
    "component",
    "config",
    "contract",
    "cursor",
    "dashboard",
    "database",
    "deadline",
    "decision",
    "dependency",
    "deploy",
    "design",
    "diff",
    "document",
    "draft",
    "editor",
    "endpoint",
    "estimate",
    "event",
    "experiment",
    "feature",
    "feedback",
    "filter",
    "folder",
    "format",
    "garden",
    "graph",
    "habit",
    "handler",
    "harvest",
    "history",
    "idea",
    "index",
    "insight",
    "interface",
    "issue",
    "journal",
    "kernel",
    "label",
    "latency",
    "layer",
    "library",
    "limit",
    "link",
    "ledger",
    "meeting",
    "memory",
    "merge",
    "metric",
    "migration",
    "milestone",
    "model",
    "module",
    "monitor",
    "network",
    "note",
    "objective",
    "outline",
    "owner",
    "package",
    "parser",
    "patch",
    "pattern",
    "pipeline",
    "plan",
    "plugin",
    "policy",
    "priority",
    "process",
    "profile",
    "project",
    "prompt",
    "proposal",
    "protocol",
    "query",
    "queue",
    "ranking",
    "reader",
    "recipe",
    "record",
    "release",
    "report",
    "request",
    "research",
    "review",
    "risk",
    "roadmap",
    "rollout",
    "runtime",
    "schema",
    "scope",
    "script",
    "search",
    "server",
    "session",
    "signal",
    "sketch",
    "snapshot",
    "source",
    "sprint",
    "storage",
    "strategy",
    "summary",
    "system",
    "target",
    "task",
    "team",
    "template",
    "thread",
    "ticket",
    "timeline",
    "token",
    "topic",
    "trace",
    "trigger",
    "update",
    "vendor",
    "version",
    "vision",
    "workflow",
    "workspace",
];

const ADJECTIVES: &[&str] = &[
    "active", "async", "brief", "broken", "careful", "central", "clean", "common", "core",
    "critical", "daily", "dense", "direct", "early", "exact", "fast", "final", "flaky", "fresh",
    "global", "hidden", "huge", "idle", "initial", "large", "late", "lazy", "legacy", "linear",
    "local", "major", "manual", "minor", "missing", "modern", "narrow", "noisy", "old", "open",
    "partial", "private", "public", "quick", "quiet", "rare", "raw", "recent", "remote", "rough",
    "shared", "short", "simple", "slow", "small", "sparse", "stable", "stale", "steady", "strict",
    "tiny", "urgent", "useful", "weekly", "wide",
];

const VERBS: &[&str] = &[
    "add", "adjust", "archive", "build", "check", "clean", "compare", "confirm", "debug", "decide",
    "define", "deploy", "draft", "drop", "estimate", "explain", "export", "fix", "follow",
    "improve", "inspect", "measure", "merge", "migrate", "move", "parse", "plan", "prepare",
    "publish", "rebuild", "record", "refactor", "rename", "replace", "review", "rewrite", "run",
    "schedule", "ship", "simplify", "sort", "split", "sync", "test", "track", "trim", "update",
    "verify", "write",
];

const SMALL: &[&str] = &[
    "the", "a", "of", "to", "and", "in", "for", "with", "on", "is", "we", "it", "this", "that",
    "not", "be", "by", "from", "or", "as",
];

const ACCENTED: &[&str] = &[
    "café",
    "naïve",
    "façade",
    "Zürich",
    "Kraków",
    "déjà-vu",
    "smörgåsbord",
    "Ångström",
    "crème-brûlée",
    "résumé",
    "Málaga",
    "Göteborg",
    "Łódź",
    "Dvořák",
    "rôle",
    "über",
    "Straße",
    "Reykjavík",
    "Müller",
    "Fernández",
];

const CJK: &[&str] = &[
    "会議メモ",
    "知识管理",
    "検索エンジンの評価",
    "数据结构与算法",
    "週次レビュー",
    "读书笔记",
    "プロジェクト計画",
    "索引の再構築",
    "사용자 인터뷰",
    "검색 품질",
    "回顾与总结",
    "全文検索",
];

const EMOJI: &[&str] = &[
    "📝", "✅", "🚀", "🔥", "💡", "📚", "⚠️", "🎯", "🐛", "📌", "🔍", "🌱",
];

const TOP_FOLDERS: &[&str] = &[
    "Projects",
    "Areas",
    "Resources",
    "Archive",
    "People",
    "Inbox",
    "Meetings",
    "Research",
    "Reading",
    "Zettel",
];

const CODE: &[(&str, &[&str])] = &[
    (
        "python",
        &[
            "def {v}_{w}(items, limit=10):",
            "    found = [x for x in items if x.{w}]",
            "    return sorted(found)[:limit]",
        ],
    ),
    (
        "bash",
        &[
            "git log --oneline -- {w}.md | head",
            "rg -n '{w}' ~/notes | wc -l",
            "make {w} && ./bin/{w} --verbose",
        ],
    ),
    (
        "rust",
        &[
            "fn {v}_{w}(input: &str) -> usize {",
            "    input.lines().filter(|l| l.contains(\"{w}\")).count()",
            "}",
        ],
    ),
    (
        "json",
        &[
            "{",
            "  \"id\": \"{w}\",",
            "  \"tags\": [\"{w}\", \"{v}\"]",
            "}",
        ],
    ),
    (
        "sql",
        &[
            "SELECT id, title FROM notes",
            "WHERE body LIKE '%{w}%'",
            "LIMIT 20;",
        ],
    ),
];

/// Target note sizes: (rank per million, bytes), interpolated in integers.
const SIZES: &[(u64, u64)] = &[
    (0, 120),
    (100_000, 500),
    (250_000, 950),
    (500_000, 1_700),
    (750_000, 3_300),
    (900_000, 7_200),
    (950_000, 13_000),
    (990_000, 48_000),
    (999_000, 150_000),
    (1_000_000, 200_000),
];

fn target_size(rank: u64) -> usize {
    for pair in SIZES.windows(2) {
        let ((r0, s0), (r1, s1)) = (pair[0], pair[1]);
        if rank < r1 {
            return (s0 + (s1 - s0) * (rank - r0) / (r1 - r0)) as usize;
        }
    }
    SIZES[SIZES.len() - 1].1 as usize
}

/// A random stream for one purpose (`what`) and item (`n`) of a seed.
fn stream(seed: u64, what: u64, n: u64) -> fastrand::Rng {
    // Three odd multipliers keep the streams of nearby seeds and items apart.
    fastrand::Rng::with_seed(
        seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ what.wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
            ^ n.wrapping_mul(0x1656_67B1_9E37_79F9),
    )
}

fn pick<'a>(rng: &mut fastrand::Rng, from: &[&'a str]) -> &'a str {
    from[rng.usize(..from.len())]
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// A note's name, title and folder, fixed before any text so links can point at it.
struct Identity {
    title: String,
    stem: String,
    path: String,
}

/// The folder pool: the top folders, then children of random earlier ones (depth 1-4).
fn folders(notes: usize, seed: u64) -> Vec<Vec<String>> {
    let mut rng = stream(seed, 1, 0);
    let want = (notes / 25).clamp(20, 800);
    let mut pool: Vec<Vec<String>> = TOP_FOLDERS.iter().map(|f| vec![f.to_string()]).collect();
    let mut tries = 0;
    while pool.len() < want && tries < want * 50 {
        tries += 1;
        let parent = pool[rng.usize(..pool.len())].clone();
        if parent.len() >= 4 {
            continue;
        }
        let list = if rng.bool() { WORDS } else { ADJECTIVES };
        let word = pick(&mut rng, list);
        let mut child = parent;
        child.push(if rng.u32(..3) > 0 {
            capitalized(word)
        } else {
            word.to_string()
        });
        if !pool.contains(&child) {
            pool.push(child);
        }
    }
    pool
}

fn identities(options: &Options) -> Vec<Identity> {
    let pool = folders(options.notes, options.seed);
    let mut used_titles = std::collections::HashSet::new();
    let mut used_paths = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(options.notes);
    for i in 0..options.notes {
        let mut rng = stream(options.seed, 2, i as u64);
        let (title, folder) = if rng.u32(..100) < 12 {
            let (y, m, d) = (2019 + rng.u32(..6), 1 + rng.u32(..12), 1 + rng.u32(..28));
            (
                format!("{y:04}-{m:02}-{d:02}"),
                vec!["Daily".to_string(), format!("{y:04}"), format!("{m:02}")],
            )
        } else {
            // Skewed towards the first (shallow) folders, as real vaults are.
            let (a, b) = (rng.usize(..pool.len()), rng.usize(..pool.len()));
            let folder = pool[a.min(b)].clone();
            (title(&mut rng), folder)
        };
        let mut unique = title.clone();
        let mut k = 2;
        while !used_titles.insert(unique.to_lowercase()) {
            unique = format!("{title} {k}");
            k += 1;
        }
        let mut stem = if rng.u32(..100) < 30 && !unique.starts_with(|c: char| c.is_ascii_digit()) {
            unique.replace(' ', "-").to_lowercase()
        } else {
            unique.clone()
        };
        let mut path = format!("{}/{stem}.md", folder.join("/"));
        while !used_paths.insert(path.to_lowercase()) {
            stem = format!("{stem}-{k}");
            k += 1;
            path = format!("{}/{stem}.md", folder.join("/"));
        }
        out.push(Identity {
            title: unique,
            stem,
            path,
        });
    }
    out
}

fn title(rng: &mut fastrand::Rng) -> String {
    match rng.u32(..100) {
        0..55 => format!(
            "{} {}",
            capitalized(pick(rng, ADJECTIVES)),
            pick(rng, WORDS)
        ),
        55..80 => format!(
            "{} {} {}",
            capitalized(pick(rng, VERBS)),
            pick(rng, ADJECTIVES),
            pick(rng, WORDS)
        ),
        80..94 => format!("{} of {}", capitalized(pick(rng, WORDS)), pick(rng, WORDS)),
        94..97 => format!(
            "{} {}",
            pick(rng, ACCENTED).replace('-', " "),
            pick(rng, WORDS)
        ),
        97..99 => pick(rng, CJK).to_string(),
        _ => format!("{} {}", capitalized(pick(rng, WORDS)), pick(rng, CJK)),
    }
}

/// Writes one note's text, block by block, until it reaches its target size.
struct Writer<'a> {
    rng: fastrand::Rng,
    me: usize,
    ids: &'a [Identity],
    options: &'a Options,
    headings: Vec<String>,
    links: usize,
    /// Per ten thousand words: accented, CJK, emoji.
    script: (u32, u32, u32),
}

impl Writer<'_> {
    fn word(&mut self) -> String {
        let (accented, cjk, emoji) = self.script;
        let k = self.rng.u32(..10_000);
        if k < accented {
            return pick(&mut self.rng, ACCENTED).to_string();
        }
        if k < accented + cjk {
            return pick(&mut self.rng, CJK).to_string();
        }
        if k < accented + cjk + emoji {
            return pick(&mut self.rng, EMOJI).to_string();
        }
        let list = match self.rng.u32(..100) {
            0..42 => WORDS,
            42..60 => ADJECTIVES,
            60..70 => VERBS,
            _ => SMALL,
        };
        pick(&mut self.rng, list).to_string()
    }

    /// A link to another note; hubs (low numbers) are linked more often.
    fn link(&mut self) -> String {
        self.links += 1;
        let n = self.ids.len();
        let kind = self.rng.u32(..100);
        if kind < 3 || n < 2 {
            return format!(
                "[[{} {}]]",
                capitalized(pick(&mut self.rng, ADJECTIVES)),
                pick(&mut self.rng, WORDS)
            );
        }
        let (a, b) = (self.rng.usize(..n), self.rng.usize(..n));
        let mut j = if self.rng.u32(..3) > 0 { a * b / n } else { a };
        if j == self.me {
            j = (j + 1) % n;
        }
        let target = &self.ids[j];
        match kind {
            3..60 => format!("[[{}]]", target.stem),
            60..80 => format!("[[{}|{}]]", target.stem, pick(&mut self.rng, WORDS)),
            80..92 => {
                let heading = capitalized(pick(&mut self.rng, WORDS));
                format!("[[{}#{heading}]]", target.stem)
            }
            92..96 => format!("[[{}]]", target.path.trim_end_matches(".md")),
            _ => format!("![[{}]]", target.stem),
        }
    }

    fn sentence(&mut self) -> String {
        let words = 6 + self.rng.usize(..14);
        let mut out = Vec::with_capacity(words);
        for _ in 0..words {
            let k = self.rng.u32(..1000);
            let piece = if k < self.options.link_permille {
                self.link()
            } else {
                match k % 100 {
                    0..3 => format!(
                        "`{}_{}`",
                        pick(&mut self.rng, VERBS),
                        pick(&mut self.rng, WORDS)
                    ),
                    3..5 => format!("**{}**", pick(&mut self.rng, WORDS)),
                    5 => format!("*{}*", pick(&mut self.rng, ADJECTIVES)),
                    6 => format!("#{}", pick(&mut self.rng, WORDS)),
                    _ => self.word(),
                }
            };
            out.push(piece);
        }
        let mut text = out.join(" ");
        text = capitalized(&text);
        text.push_str(pick(&mut self.rng, &[".", ".", ".", "?", "!", ":"]));
        text
    }

    fn paragraph(&mut self) -> String {
        let sentences = 1 + self.rng.usize(..5);
        let parts: Vec<String> = (0..sentences).map(|_| self.sentence()).collect();
        parts.join(" ")
    }

    fn list(&mut self) -> String {
        let numbered = self.rng.u32(..4) == 0;
        let tasks = !numbered && self.rng.u32(..3) == 0;
        let mut lines = Vec::new();
        for j in 0..2 + self.rng.usize(..7) {
            let prefix = if numbered {
                format!("{}. ", j + 1)
            } else if tasks {
                format!("- [{}] ", if self.rng.u32(..3) == 0 { "x" } else { " " })
            } else {
                "- ".to_string()
            };
            lines.push(format!("{prefix}{}", self.sentence()));
            if self.rng.u32(..5) == 0 {
                lines.push(format!("    - {}", self.sentence()));
            }
        }
        lines.join("\n")
    }

    fn code(&mut self) -> String {
        let (language, template) = CODE[self.rng.usize(..CODE.len())];
        let (verb, word) = (pick(&mut self.rng, VERBS), pick(&mut self.rng, WORDS));
        let body: Vec<String> = template
            .iter()
            .map(|line| line.replace("{v}", verb).replace("{w}", word))
            .collect();
        format!("```{language}\n{}\n```", body.join("\n"))
    }

    fn table(&mut self) -> String {
        let mut lines = vec![
            "| item | owner | state |".to_string(),
            "| --- | --- | --- |".to_string(),
        ];
        for _ in 0..2 + self.rng.usize(..5) {
            lines.push(format!(
                "| {} | {} | {} |",
                pick(&mut self.rng, WORDS),
                pick(&mut self.rng, ADJECTIVES),
                pick(&mut self.rng, &["open", "done", "blocked", "waiting"])
            ));
        }
        lines.join("\n")
    }

    fn heading(&mut self) -> String {
        let text = format!(
            "{} {}",
            capitalized(pick(&mut self.rng, ADJECTIVES)),
            pick(&mut self.rng, WORDS)
        );
        self.headings.push(text.clone());
        let level = if self.rng.u32(..3) == 0 { "###" } else { "##" };
        format!("{level} {text}")
    }

    fn front_matter(&mut self, title: &str) -> String {
        let tags: Vec<&str> = (0..1 + self.rng.usize(..3))
            .map(|_| pick(&mut self.rng, WORDS))
            .collect();
        let (y, m, d) = (
            2019 + self.rng.u32(..6),
            1 + self.rng.u32(..12),
            1 + self.rng.u32(..28),
        );
        let mut text = format!(
            "---\ntitle: \"{}\"\ncreated: {y:04}-{m:02}-{d:02}\ntags: [{}]\n",
            title.replace('"', "'"),
            tags.join(", ")
        );
        if self.rng.u32(..4) == 0 {
            text.push_str(&format!("aliases: [\"{}\"]\n", pick(&mut self.rng, WORDS)));
        }
        text.push_str("---\n");
        text
    }

    fn note(&mut self) -> String {
        let me = &self.ids[self.me];
        let title = me.title.clone();
        let target = target_size(self.rng.u64(..1_000_000)).min(self.options.max_note_bytes);
        let mut text = String::new();
        if self.rng.u32(..1000) < self.options.front_matter_permille {
            text.push_str(&self.front_matter(&title));
        }
        text.push_str(&format!("# {title}\n"));
        while text.len() < target {
            text.push('\n');
            let block = match self.rng.u32(..1000) {
                0..140 => self.heading(),
                140..600 => self.paragraph(),
                600..780 => self.list(),
                780..840 => self.code(),
                840..880 => self.table(),
                880..940 => format!("> {}", self.sentence()),
                940..997 => {
                    let tags: Vec<String> = (0..1 + self.rng.usize(..4))
                        .map(|_| format!("#{}", pick(&mut self.rng, WORDS)))
                        .collect();
                    tags.join(" ")
                }
                // Now and then a long unwrapped line (up to 32 KB), as pasted text is.
                _ => {
                    let room = (target - text.len()).clamp(200, 32_000);
                    let mut line = self.sentence();
                    while line.len() < room {
                        line.push(' ');
                        line.push_str(&self.sentence());
                    }
                    line
                }
            };
            text.push_str(&block);
            text.push('\n');
        }
        if self.rng.u32(..1000) < self.options.no_eol_permille {
            while text.ends_with('\n') {
                text.pop();
            }
        }
        if self.rng.u32(..1000) < self.options.crlf_permille {
            text = text.replace('\n', "\r\n");
        }
        text
    }
}

/// Every note of the vault, in order, with the number of links and folders.
pub fn notes(options: &Options) -> (Vec<Note>, usize, usize) {
    let ids = identities(options);
    let mut links = 0;
    let mut notes = Vec::with_capacity(ids.len());
    for (i, id) in ids.iter().enumerate() {
        let mut rng = stream(options.seed, 3, i as u64);
        let script = match rng.u32(..100) {
            0..70 => (8, 0, 0),
            70..85 => (15, 0, 150),
            85..93 => (300, 0, 30),
            _ => (10, 1000, 50),
        };
        let mut writer = Writer {
            rng,
            me: i,
            ids: &ids,
            options,
            headings: Vec::new(),
            links: 0,
            script,
        };
        let text = writer.note();
        links += writer.links;
        notes.push(Note {
            path: id.path.clone(),
            text,
        });
    }
    let mut folders: Vec<&str> = ids
        .iter()
        .filter_map(|id| id.path.rsplit_once('/'))
        .map(|(f, _)| f)
        .collect();
    folders.sort_unstable();
    folders.dedup();
    (notes, links, folders.len())
}

/// Writes the vault into `dir` (created; it must be empty or missing).
pub fn generate(dir: &Path, options: &Options) -> std::io::Result<Summary> {
    if dir.exists() && std::fs::read_dir(dir)?.next().is_some() {
        return Err(std::io::Error::other(format!(
            "{} is not empty; choose a new folder",
            dir.display()
        )));
    }
    let (notes, links, folders) = notes(options);
    let mut sizes = Vec::with_capacity(notes.len());
    for note in &notes {
        let path = dir.join(&note.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, &note.text)?;
        sizes.push(note.text.len());
    }
    sizes.sort_unstable();
    let at = |q: usize| {
        sizes
            .get((sizes.len().saturating_sub(1)) * q / 100)
            .copied()
            .unwrap_or(0)
    };
    Ok(Summary {
        notes: notes.len(),
        bytes: sizes.iter().map(|s| *s as u64).sum(),
        links,
        folders,
        median_bytes: at(50),
        p90_bytes: at(90),
        max_bytes: sizes.last().copied().unwrap_or(0),
    })
}

/// Makes `dir` a git repository (branch `main`) whose history holds its notes in
/// `commits` commits (path order), by a fixed author an hour apart from
/// 2024-01-01T00:00:00Z, so the commit ids are the same on every run.
pub fn commit(dir: &Path, commits: usize) -> Result<git2::Oid, git2::Error> {
    let mut init = git2::RepositoryInitOptions::new();
    init.initial_head("main");
    let repo = git2::Repository::init_opts(dir, &init)?;
    let mut paths: Vec<String> = walk_notes(dir);
    paths.sort_unstable();
    let commits = commits.clamp(1, paths.len().max(1));
    let per = paths.len().div_ceil(commits).max(1);
    let mut index = repo.index()?;
    let mut parent: Option<git2::Commit<'_>> = None;
    let mut last = git2::Oid::zero();
    for (k, chunk) in paths.chunks(per).enumerate() {
        for path in chunk {
            index.add_path(Path::new(path))?;
        }
        index.write()?;
        let tree = repo.find_tree(index.write_tree()?)?;
        let when = git2::Time::new(1_704_067_200 + 3600 * k as i64, 0);
        let who = git2::Signature::new("Vault Generator", "vault@example.invalid", &when)?;
        let message = format!("notes {}/{}\n", k + 1, commits);
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        last = repo.commit(Some("HEAD"), &who, &who, &message, &tree, &parents)?;
        parent = Some(repo.find_commit(last)?);
    }
    Ok(last)
}

/// The files under `dir`, relative (`.git` skipped).
fn walk_notes(dir: &Path) -> Vec<String> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_entry(|e| e.file_name() != ".git")
        .flatten()
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| {
            Some(
                e.path()
                    .strip_prefix(dir)
                    .ok()?
                    .to_string_lossy()
                    .into_owned(),
            )
        })
        .collect()
}
