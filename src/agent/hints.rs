//! What a task's own words call for, read once at the start of a run: the
//! note and the tag it names, and whether it asks a question, about links,
//! about a heading, for a move or for a spelling fix, and the words it looks for. The prompt shows the vault examples the
//! task calls for, filled with the task's own names (small models copy an
//! example's values: a tag example copied into a search finds nothing), and
//! the first call mirai shows or runs is chosen by them. The words decide
//! only what is shown: every row stays in the API reference whatever they say.

use crate::ops::adapters::index_terms;

/// The hints one task gives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hints {
    /// The first word ending in `.md` (not checked against the notes here).
    pub note: Option<String>,
    /// A tag the task names (`#recipe`, `tagged recipe`, `the tag "recipe"`).
    pub tag: Option<String>,
    /// The task speaks of tags at all.
    pub tags: bool,
    /// The task speaks of links or backlinks.
    pub links: bool,
    /// The task speaks of a heading.
    pub heading: bool,
    /// The task speaks of moving or renaming (a note, unless it names a heading).
    pub moves: bool,
    /// The task asks a question (a `?`, or it opens with a question word).
    pub question: bool,
    /// The task asks for a change: it opens with a verb of one ("Delete
    /// scratch.md.", "In todo.md, add ..." after a leading "In x,").
    pub change: bool,
    /// The task speaks of spelling or a typo.
    pub spelling: bool,
    /// The task speaks of front matter or a field.
    pub front_matter: bool,
    /// The texts the task quotes ("Append the line \"Saw a kingfisher.\""), in
    /// order: straight or curly double quotes.
    pub quoted: Vec<String>,
    /// The words the task looks for, as the index's terms (stemmed, past the
    /// stop list and the words any task about notes has: "note", "mention",
    /// a path's "md"), sorted. A search whose hits hold none of them found
    /// only those generic words.
    pub terms: Vec<String>,
}

/// Words of a task about notes that say nothing of what it looks for.
const GENERIC: &str = "note notes mention mentions mentioned say says said tell find show md \
     file files vault";

/// The task's own terms (see [`Hints::terms`]).
fn task_terms(task: &str) -> Vec<String> {
    let generic = index_terms(GENERIC);
    let mut terms: Vec<String> = index_terms(task)
        .into_iter()
        .filter(|term| !generic.contains(term))
        .collect();
    terms.sort();
    terms.dedup();
    terms
}

/// The texts between double quotes (straight, or curly “ ”), in order.
fn quoted(task: &str) -> Vec<String> {
    let parts: Vec<&str> = task.split('"').collect();
    // An odd part is inside quotes when a part follows it (the quote closed).
    let straight = parts
        .iter()
        .copied()
        .enumerate()
        .filter(|&(i, _)| i % 2 == 1 && i + 1 < parts.len())
        .map(|(_, inside)| inside);
    let curly = task
        .split('“')
        .skip(1)
        .filter_map(|rest| rest.split_once('”').map(|(inside, _)| inside));
    straight
        .chain(curly)
        .filter(|inside| !inside.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// Whether `text` holds one of `terms` (as the index's terms).
pub fn holds_any(text: &str, terms: &[String]) -> bool {
    index_terms(text)
        .iter()
        .any(|term| terms.binary_search(term).is_ok())
}

/// Verbs that open a request for a change to the notes.
const CHANGE_WORDS: [&str; 25] = [
    "add", "append", "create", "delete", "remove", "rename", "move", "change", "edit", "fix",
    "replace", "set", "update", "write", "insert", "make", "put", "give", "mark", "tag", "prepend",
    "rewrite", "correct", "link", "archive",
];

/// A polite request's opening: "Can you delete x?" asks for a change.
const POLITE: [&str; 4] = ["can you ", "could you ", "would you ", "will you "];

/// Whether `task` asks for a change: past a leading "In x,", "Please" or a
/// polite opening, it opens with a verb of change, and it asks no question
/// unless politely.
fn asks_for_a_change(task: &str) -> bool {
    let lower = task.trim().to_lowercase();
    let rest = match lower.strip_prefix("in ") {
        Some(rest) => rest.split_once(',').map_or("", |(_, rest)| rest),
        None => &lower,
    };
    let rest = rest.trim_start();
    let rest = rest
        .strip_prefix("please")
        .unwrap_or(rest)
        .trim_start_matches([',', ' ']);
    let polite = POLITE.iter().find_map(|opening| rest.strip_prefix(opening));
    let rest = polite.unwrap_or(rest);
    let opens = rest
        .split(|c: char| !c.is_alphabetic())
        .find(|word| !word.is_empty())
        .is_some_and(|first| CHANGE_WORDS.contains(&first));
    opens && (polite.is_some() || !task.contains('?'))
}

/// Words that open a question or a request for an answer.
const QUESTION_WORDS: [&str; 14] = [
    "what", "which", "who", "whom", "when", "where", "why", "how", "does", "do", "is", "are",
    "find", "list",
];

impl Hints {
    pub fn of(task: &str) -> Hints {
        let words: Vec<String> = task
            .split(|c: char| c.is_whitespace() || "\"'`,;()?!“”‘’".contains(c))
            .map(|word| word.trim_end_matches(['.', ':']).to_string())
            .filter(|word| !word.is_empty())
            .collect();
        let lower: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
        let has = |stem: &str| lower.iter().any(|word| word.starts_with(stem));
        let note = words
            .iter()
            .find(|word| word.len() > 3 && word.ends_with(".md"))
            .cloned();
        let tag = named_tag(task, &words, &lower);
        let tags = has("tag") || tag.is_some();
        Hints {
            note,
            tag,
            tags,
            links: has("link") || has("backlink"),
            heading: has("heading"),
            moves: has("move") || has("renam"),
            question: task.contains('?')
                || lower
                    .first()
                    .is_some_and(|first| QUESTION_WORDS.contains(&first.as_str())),
            change: asks_for_a_change(task),
            spelling: has("spell") || has("typo") || has("misspel"),
            front_matter: task.to_lowercase().contains("front matter")
                || has("frontmatter")
                || has("field"),
            quoted: quoted(task),
            terms: task_terms(task),
        }
    }
}

/// The tag a task names: a `#word`; the word after `tagged` (`tagged
/// recipe`, `tagged with recipe`); or a quoted word after `tag` or `tags`
/// (`the tag "recipe"`: unquoted, the next word is as likely English).
fn named_tag(task: &str, words: &[String], lower: &[String]) -> Option<String> {
    let clean = |word: &str| -> Option<String> {
        let tag = word.trim_start_matches('#');
        let ok = !tag.is_empty()
            && tag
                .chars()
                .all(|c| c.is_alphanumeric() || "-_/".contains(c));
        ok.then(|| tag.to_string())
    };
    if let Some(hashed) = words
        .iter()
        .filter(|word| word.starts_with('#') && word.len() > 1)
        .find_map(|word| clean(word))
    {
        return Some(hashed);
    }
    let quoted = |word: &str| {
        ["\"", "'", "`", "“"]
            .iter()
            .any(|quote| task.contains(&format!("{quote}{word}")))
    };
    lower.iter().enumerate().find_map(|(at, word)| {
        let after = |skip: usize| words.get(at + 1 + skip);
        match word.as_str() {
            "tagged" => {
                let next = after(0)?;
                let next = match next.to_lowercase().as_str() {
                    "with" | "as" => after(1)?,
                    _ => next,
                };
                clean(next)
            }
            "tag" | "tags" => {
                let next = after(0)?;
                let next = match next.to_lowercase().as_str() {
                    "called" | "named" => after(1)?,
                    _ => next,
                };
                quoted(next).then(|| clean(next)).flatten()
            }
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_read_from_hashes_and_from_the_word_after_tagged() {
        for (task, tag) in [
            ("Which notes are tagged recipe? List their paths.", "recipe"),
            ("List the notes tagged #work/urgent.", "work/urgent"),
            ("Which notes carry the tag \"garden\"?", "garden"),
            ("Which notes are tagged with baking?", "baking"),
        ] {
            let hints = Hints::of(task);
            assert_eq!(hints.tag.as_deref(), Some(tag), "{task}");
            assert!(hints.tags && hints.question, "{task}");
        }
        let untagged = Hints::of("Which note mentions a heron? Answer with its path.");
        assert_eq!(untagged.tag, None);
        assert!(!untagged.tags && untagged.question && !untagged.links);
        for untagged in ["Add a tag to the note.", "Which tags do I use most?"] {
            let hints = Hints::of(untagged);
            assert_eq!(hints.tag, None, "{untagged}");
            assert!(hints.tags, "{untagged}");
        }
    }

    #[test]
    fn notes_links_headings_and_moves_are_told_apart() {
        let backlinks = Hints::of("Which notes link to projects/garden.md?");
        assert_eq!(backlinks.note.as_deref(), Some("projects/garden.md"));
        assert!(backlinks.links && backlinks.question && !backlinks.moves);
        let heading =
            Hints::of("In projects/garden.md, rename the heading \"Plans\" to \"Spring plans\".");
        assert!(heading.heading && heading.moves && !heading.question);
        let moving = Hints::of("Move ideas.md into the archive folder (archive/ideas.md).");
        assert_eq!(moving.note.as_deref(), Some("ideas.md"));
        assert!(moving.moves && !moving.heading && !moving.question);
        let plain = Hints::of("Append the line \"Saw a kingfisher.\" to journal.md.");
        assert_eq!(
            (
                plain.tags,
                plain.links,
                plain.heading,
                plain.moves,
                plain.question
            ),
            (false, false, false, false, false)
        );
        // Requests for a change, told from questions and other requests.
        assert!(plain.change && heading.change && moving.change);
        assert!(Hints::of("Delete scratch.md.").change);
        assert!(Hints::of("Please set status to done in todo.md").change);
        assert!(!backlinks.change);
        assert!(!Hints::of("Summarize todo.md.").change);
        assert!(!Hints::of("Add up my hours: how many are there?").change);
        assert!(Hints::of("Can you delete todo.md?").change);
        assert!(Hints::of("Set the status field of a.md to done.").front_matter);
        assert!(!Hints::of("Set the heading of a.md to Done.").front_matter);
        assert_eq!(
            Hints::of("Append the line \"Saw a kingfisher.\" to “journal.md”.").quoted,
            ["Saw a kingfisher.", "journal.md"]
        );
        assert!(Hints::of("Add an unclosed \"quote to todo.md")
            .quoted
            .is_empty());
        assert!(Hints::of("Give journal.md a front matter field owner with the value Sam.").change);
        assert!(Hints::of("Please, could you rename todo.md to tasks.md?").change);
        assert!(!Hints::of("Can you tell me what todo.md says?").change);
        // The words a task looks for, past the generic ones.
        assert_eq!(Hints::of("Which note mentions a heron?").terms, ["heron"]);
        assert_eq!(
            Hints::of("What does handbook.md say about the fire door?").terms,
            ["door", "fire", "handbook"]
        );
        assert!(holds_any(
            "Saw a blue Herons flock.",
            &Hints::of("Which note mentions a heron?").terms
        ));
        assert!(!holds_any(
            "welcome.md: notes served by mirai",
            &Hints::of("Which note mentions a heron?").terms
        ));
        // A spelling fix, however it is named.
        assert!(Hints::of("Fix the spelling mistake in journal.md.").spelling);
        assert!(Hints::of("Correct the typo in todo.md").spelling);
        assert!(Hints::of("There is a misspelt word in a.md: fix it").spelling);
        assert!(!plain.spelling && !heading.spelling);
    }
}
