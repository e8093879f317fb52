//! The system prompt, generated from the operation table: every `mirai.*`
//! function with its request and response shapes (from the types' JSON
//! Schemas), its summary and example; the errors; the limits; the protocol.
//! Nothing about the API is written here by hand.

use std::fmt::Write;

use serde_json::Value;

use super::hints::Hints;
use crate::error::ErrorCode;
use crate::ops::guard::ALLOW_LARGE_DELETE;
use crate::ops::{Class, PromptDetail, TABLE};
use crate::sandbox::SandboxLimits;

/// When to use which operation, one line each (the vault's when the task
/// calls for them, with its own note and tag), and a worked example of a
/// question answered from a search.
fn choosing(hints: &Hints) -> String {
    // A path longer than this is left out: the made-up one is shown instead.
    let note = hints
        .note
        .as_deref()
        .filter(|note| note.len() <= MAX_SHOWN_PATH);
    let mut out = String::from(
        "\n# Which operation\n\
         - A question about the notes: search with mirai.index.query first (never answer from memory), read \
         what it finds, and name each note's path in the reply.\n",
    );
    let long = note.unwrap_or("h.md");
    let _ = writeln!(
        out,
        "- A long note: `(await mirai.notes.outline({{path: {long:?}}})).headings`, then \
         `mirai.notes.read({{path: {long:?}, section: \"Part 3\"}})`"
    );
    if hints.tags {
        let tag = hints.tag.as_deref().unwrap_or("recipe");
        let _ = writeln!(
            out,
            "- Notes with the tag: `(await mirai.notes.list({{tag: {tag:?}}})).notes` (paths)"
        );
    }
    if hints.links {
        let _ = writeln!(
            out,
            "- Backlinks: `(await mirai.notes.links({{path: {:?}}})).backlinks.map(b => b.path)`",
            note.unwrap_or("garden.md")
        );
    }
    out.push_str(
        "Example, over two answers:\n\
         <think>A question about the notes: search first.</think>\n\
         <code>const hits = await mirai.index.query({q: \"dentist\", limit: 3});\n\
         return hits.chunks.map(c => [c.metadata.path, c.content]);</code>\n\
         (the observation shows health/visits.md with the line \"Dentist on Friday at 9.\")\n\
         <think>health/visits.md answers it.</think>\n\
         <reply>health/visits.md says: \"Dentist on Friday at 9.\"</reply>\n\
         (The example's notes are made up: use the paths and text of the notes you are given.)\n",
    );
    out
}

/// The longest path of the task's that the prompt's examples show.
const MAX_SHOWN_PATH: usize = 40;

/// Which write to use, one line each (a typo's fix, a heading's rename or a
/// move when the task speaks of one), and a worked example (left out when writes are
/// denied); [`ALLOW_LARGE_DELETE`] follows it.
fn writing(hints: &Hints) -> String {
    let mut out = String::from(
        "\n# Writing\n\
         - Adding lines: mirai.notes.append (at the end) or mirai.notes.insert (under a heading, or after or before a line).\n\
         - Changing text: mirai.notes.edit, with `old` copied exactly from the note (long enough to occur once).\n\
         - Deleting a note: mirai.notes.delete.\n\
         - One section only: notes.edit with `section: \"Monday\"`.\n\
         - A front matter field: `mirai.notes.front_matter({path, set: {status: \"done\"}})` (or `remove: [\"draft\"]`), \
         never a rewrite.\n",
    );
    // One of these at most: a typo in a heading is fixed as any typo.
    if hints.spelling {
        out.push_str(
            "- A spelling mistake: notes.edit on the misspelled word alone: \
             `edits: [{old: \"teh\", new: \"the\"}]` (no other word changes).\n",
        );
    } else if hints.heading {
        out.push_str(
            "- Renaming a heading: notes.edit on its line: `edits: [{old: \"## Ideas\", new: \"## Old ideas\"}]` \
             (not notes.move: that renames the file).\n",
        );
    } else if hints.moves {
        out.push_str(
            "- Rename or move a note's file (links follow): `mirai.notes.move({from: \"a.md\", to: \"old/a.md\"})`\n",
        );
    }
    out.push_str(
        "- A new note, or a whole note rewritten: mirai.notes.write with the whole text.\n\
         - A unified diff you already hold: mirai.patch.apply.\n\
         - A write succeeded only when its answer has a `commit` and the observation shows no error. \
         If a call failed, nothing changed: read the note again, fix the request, and retry before replying.\n\
         Example, over three answers:\n\
         <think>I need the exact text of shop/list.md first.</think>\n\
         <code>return (await mirai.notes.read({path: \"shop/list.md\"})).content;</code>\n\
         (the observation shows the note, with the line \"- apples\")\n\
         <think>Replace that line.</think>\n\
         <code>return await mirai.notes.edit({path: \"shop/list.md\", edits: [{old: \"- apples\", new: \"- green apples\"}]});</code>\n\
         (the observation shows a commit)\n\
         <think>The edit is committed.</think>\n\
         <reply>Changed \"apples\" to \"green apples\" in shop/list.md.</reply>\n",
    );
    out
}

/// The most tokens the generated prompt may take: half of the 8k context of
/// the small local models mirai is run with, so the task, the answers and the
/// observations keep the other half. Counted by [`prompt_tokens`].
pub const PROMPT_TOKEN_BUDGET: usize = 4000;

/// The tokens `prompt` takes, counted for the budget: its o200k_base BPE
/// count (the tokenizer notes.read counts with) plus a tenth, for the
/// tokenizers of the small open models (Qwen's, Llama's), which cut English
/// and code a little finer. (Bytes / 3, the older estimate, overstates the
/// BPE count of this prompt by about 30%.)
pub fn prompt_tokens(prompt: &str) -> usize {
    crate::ops::adapters::count_tokens(prompt) * 11 / 10
}

/// What the prompt states about the run it opens.
pub struct PromptFacts {
    pub max_steps: usize,
    pub deadline_ms: u64,
    pub sandbox: SandboxLimits,
    pub observation_cap: usize,
    pub dry_run: bool,
    pub read_only: bool,
    /// Review mode: the run's writes become one proposal for a person to approve.
    pub review: bool,
}

/// The prompt for one run: `hints` are the task's (see [`Hints`]).
pub fn system_prompt(facts: &PromptFacts, hints: &Hints) -> String {
    let mut out = String::new();
    out.push_str(
        "You are mirai's agent. mirai keeps a git repository of markdown notes; you read and change \
         the notes by writing JavaScript that runs in a sandbox, where the only way out is the async \
         `mirai.*` API below. Every successful write is one git commit.\n\n",
    );
    out.push_str("# How to answer\n");
    out.push_str(
        "Each answer is <think>your short reasoning</think> followed by either\n\
         - <code>JavaScript</code>: it runs as the body of an async function, so use `await` and \
         `return` a JSON value; `console.log` output is shown to you too; or\n\
         - <reply>your final answer to the user</reply> when the task is done (or cannot be done).\n\
         Write one <code> block per answer and then stop: its outcome comes back to you as \
         <observation>{\"result\", \"error\", \"console\", \"calls\"}</observation>. Never write an \
         observation yourself. Only claim a change in <reply> when a write call succeeded.\n\n",
    );
    out.push_str("# The mirai API\n");
    out.push_str(&api_reference(facts.read_only));
    out.push_str(&choosing(hints));
    if !facts.read_only {
        out.push_str(&writing(hints));
        let _ = writeln!(out, "- {ALLOW_LARGE_DELETE}");
    }
    out.push_str("\n# Errors\n");

    out.push_str(
        "A failed call throws an Error whose `.code` says why (a failed write changes nothing); \
         catch it to recover, e.g. read the note again after a `conflict`. Codes: ",
    );
    let codes: Vec<&str> = ErrorCode::ALL
        .iter()
        .filter(|code| is_operation_code(**code))
        .map(|code| code.as_str())
        .collect();
    out.push_str(&codes.join(", "));
    out.push_str(".\n\n# Limits\n");
    let sandbox = &facts.sandbox;
    let _ = writeln!(
        out,
        "- At most {} answers in this run, and {} seconds in all.",
        facts.max_steps,
        facts.deadline_ms / 1000
    );
    let _ = writeln!(
        out,
        "- Each <code> block: {} MiB of memory, {} ms, {} mirai calls, {} bytes of console output and result. \
         There is no fetch, filesystem, timers or import.",
        sandbox.memory_bytes / (1024 * 1024),
        sandbox.timeout_ms,
        sandbox.max_calls,
        sandbox.max_output_bytes
    );
    let _ = writeln!(
        out,
        "- Observations show at most {} bytes of each of result and console; return only what you need.",
        facts.observation_cap
    );
    if facts.read_only {
        out.push_str(
            "- This deployment is read-only: you can read and search, not write. If the task needs a \
             change, do not attempt it: reply that the deployment is read-only and nothing was changed.\n",
        );
    }
    if facts.review {
        out.push_str(
            "- Writes are proposed for a person to approve: each answers {proposal, changes} (no commit), \
             later reads see them; all become one proposal. Work as you would for real.\n",
        );
    }
    if facts.dry_run {
        out.push_str(
            "- This is a dry run: writes are kept aside for a person to review (their `commit` is null) \
             and later reads see them. Work as you would for real.\n",
        );
    }
    out
}

/// Every `mirai.*` function with its request's shape and its summary, and
/// for the rows shown in full ([`PromptDetail::Full`]) its answer's shape,
/// documented request fields and example; fields many rows share are described once, at the end. Write
/// functions are left out when `read_only`. The agent's prompt and MCP's
/// code-mode tool both describe the API with this.
pub fn api_reference(read_only: bool) -> String {
    let mut out = String::from("(A field marked `?` may be absent or null.)\n");
    let mut shared: Vec<(String, String)> = Vec::new();
    for op in TABLE {
        // A model can never decide a proposal: the reviewer's rows are left out.
        if (read_only && op.class == Class::Write) || op.class == Class::Review {
            continue;
        }
        let request = shape(&(op.request_schema)().to_value());
        let argument = if request == "{}" {
            String::new()
        } else {
            request
        };
        if op.prompt == PromptDetail::Brief {
            let _ = writeln!(out, "mirai.{}({argument})\n  {}", op.name, op.summary);
            continue;
        }
        let response = shape(&(op.committed_schema)().to_value());
        let _ = writeln!(out, "mirai.{}({argument}) -> {response}", op.name);
        let _ = writeln!(out, "  {}", op.summary);
        for (field, description) in field_descriptions(&(op.request_schema)().to_value()) {
            if SHARED_FIELDS.contains(&field.as_str()) {
                if !shared.iter().any(|(name, _)| *name == field) {
                    shared.push((field, description));
                }
                continue;
            }
            let _ = writeln!(out, "  {field}: {description}");
        }
        let _ = writeln!(out, "  e.g. {}", op.example);
    }
    if !shared.is_empty() {
        out.push_str("Fields several calls share:\n");
        for (field, description) in shared {
            let _ = writeln!(out, "  {field}: {description}");
        }
    }
    out
}

/// Request fields many rows carry with one meaning: described once, after the rows.
const SHARED_FIELDS: [&str; 2] = ["base_commit", "allow_large_delete"];

/// Codes an operation can throw (not the HTTP adapter's, the sandbox's or the agent's own).
fn is_operation_code(code: ErrorCode) -> bool {
    !matches!(
        code,
        ErrorCode::Unauthorized
            | ErrorCode::OriginRefused
            | ErrorCode::TooManyStreams
            | ErrorCode::UnsupportedMediaType
            | ErrorCode::RequestTimeout
            | ErrorCode::MethodNotAllowed
            | ErrorCode::LlmUnavailable
            | ErrorCode::ProtocolError
            | ErrorCode::SandboxTimeout
            | ErrorCode::SandboxMemory
            | ErrorCode::SandboxCallLimit
            | ErrorCode::SandboxOutputLimit
            | ErrorCode::SandboxError
    )
}

/// A compact TypeScript-like rendering of a JSON Schema: `{path: string, base_commit?: string}`
/// (`?`: the field may be absent or null).
pub fn shape(schema: &Value) -> String {
    render(schema, schema, 0)
}

fn render(node: &Value, root: &Value, depth: usize) -> String {
    if depth > 6 {
        return "any".into();
    }
    if let Some(reference) = node.get("$ref").and_then(Value::as_str) {
        let name = reference.rsplit('/').next().unwrap_or_default();
        return match root.get("$defs").and_then(|defs| defs.get(name)) {
            Some(def) => render(def, root, depth + 1),
            None => "any".into(),
        };
    }
    for combinator in ["anyOf", "oneOf"] {
        if let Some(options) = node.get(combinator).and_then(Value::as_array) {
            return join_union(options.iter().map(|o| render(o, root, depth + 1)));
        }
    }
    match node.get("type") {
        Some(Value::Array(types)) => join_union(types.iter().map(|t| {
            let mut single = node.clone();
            single["type"] = t.clone();
            render(&single, root, depth + 1)
        })),
        Some(Value::String(kind)) => match kind.as_str() {
            "object" => object(node, root, depth),
            "array" => {
                let item = node
                    .get("items")
                    .map_or("any".to_string(), |items| render(items, root, depth + 1));
                if item.contains(" | ") {
                    format!("({item})[]")
                } else {
                    format!("{item}[]")
                }
            }
            "integer" => "integer".into(),
            other => other.to_string(),
        },
        _ => "any".into(),
    }
}

fn object(node: &Value, root: &Value, depth: usize) -> String {
    let Some(properties) = node.get("properties").and_then(Value::as_object) else {
        return "{}".into();
    };
    let required: Vec<&str> = node
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // A field nested past the depth shown says nothing but `any`: left out, and `…` says so.
    let mut cut = false;
    let mut fields: Vec<String> = properties
        .iter()
        .filter_map(|(name, schema)| {
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            let mut rendered = render(schema, root, depth + 1);
            // `?` already says "absent or null" (the prompt says so once).
            if !optional.is_empty() {
                if let Some(without) = rendered.strip_suffix(" | null") {
                    rendered = without.to_string();
                }
            }
            if rendered == "any" || rendered == "any[]" {
                cut = true;
                return None;
            }
            Some(format!("{name}{optional}: {rendered}"))
        })
        .collect();
    if cut {
        fields.push("…".to_string());
    }
    format!("{{{}}}", fields.join(", "))
}

fn join_union(parts: impl Iterator<Item = String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for part in parts {
        if !seen.contains(&part) {
            seen.push(part);
        }
    }
    seen.join(" | ")
}

/// The request's documented top-level fields, for a line each under the signature.
fn field_descriptions(schema: &Value) -> Vec<(String, String)> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .iter()
                .filter_map(|(name, field)| {
                    let description = field.get("description").and_then(Value::as_str)?;
                    Some((name.clone(), description.replace('\n', " ")))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn facts() -> PromptFacts {
        PromptFacts {
            max_steps: 8,
            deadline_ms: 120_000,
            sandbox: SandboxLimits::default(),
            observation_cap: 4096,
            dry_run: false,
            read_only: false,
            review: false,
        }
    }

    #[test]
    fn shapes_read_like_typescript() {
        let schema = json!({
            "type": "object",
            "required": ["path", "edits"],
            "properties": {
                "path": {"type": "string"},
                "edits": {"type": "array", "items": {"$ref": "#/$defs/Edit"}},
                "base_commit": {"type": ["string", "null"]}
            },
            "$defs": {"Edit": {"type": "object", "required": ["old", "new"],
                "properties": {"old": {"type": "string"}, "new": {"type": "string"}}}}
        });
        assert_eq!(
            shape(&schema),
            "{base_commit?: string, edits: {new: string, old: string}[], path: string}"
        );
    }

    #[test]
    fn every_operation_appears_with_its_shapes_and_full_rows_with_their_example() {
        let prompt = system_prompt(&facts(), &Hints::default());
        for op in TABLE {
            if op.class == Class::Review {
                assert!(
                    !prompt.contains(&format!("mirai.{}(", op.name)),
                    "{}",
                    op.name
                );
                continue;
            }
            assert!(
                prompt.contains(&format!("mirai.{}(", op.name)),
                "{}",
                op.name
            );
            assert!(prompt.contains(op.summary), "{}", op.name);
            if op.prompt == PromptDetail::Full {
                assert!(prompt.contains(op.example), "{}", op.name);
            }
        }
        assert!(prompt.contains(
            "mirai.notes.read({lines?: string, path: string, rev?: string, section?: string}) -> {commit?: string, content: string, front_matter?: {}, front_matter_error?: string, line_count: integer, line_end?: integer, line_start?: integer, path: string, tokens: integer}"
        ));
        assert!(prompt.contains("200 mirai calls"));
        assert!(!prompt.contains("sandbox_timeout"));
    }

    #[test]
    fn the_prompt_says_which_operation_to_use_and_shows_a_search_answered() {
        let prompt = system_prompt(&facts(), &Hints::default());
        for line in [
            "- A question about the notes: search with mirai.index.query first",
            "- Adding lines: mirai.notes.append",
            "- Changing text: mirai.notes.edit",
            "- Deleting a note: mirai.notes.delete.",
            "allow_large_delete: true",
            "(await mirai.notes.outline({path: \"h.md\"})).headings",
            "section: \"Part 3\"",
            "notes.edit with `section: \"Monday\"`",
            "mirai.notes.front_matter({path, set: {status: \"done\"}})",
        ] {
            assert!(prompt.contains(line), "{line}");
        }
        let search = prompt
            .find("await mirai.index.query({q: \"dentist\"")
            .unwrap();
        let answer = prompt
            .find("<reply>health/visits.md says: \"Dentist on Friday at 9.\"")
            .unwrap();
        assert!(
            search < answer,
            "the example searches, then answers with the path"
        );
    }

    #[test]
    fn vault_examples_appear_when_the_task_calls_for_them_with_its_own_names() {
        let prompt = |task: &str| system_prompt(&facts(), &Hints::of(task));
        let (tag_line, links_line, heading_line, move_line) = (
            "- Notes with the tag:",
            "- Backlinks:",
            "- Renaming a heading: notes.edit on its line",
            "- Rename or move a note's file (links follow):",
        );
        let tagged = prompt("Which notes are tagged baking? List their paths.");
        assert!(tagged.contains("`(await mirai.notes.list({tag: \"baking\"})).notes` (paths)"));
        assert!(!tagged.contains("recipe"), "no other tag to copy");
        // A question about words: no tag to copy into a search, no link or move rows.
        let heron = prompt("Which note mentions a heron? Answer with its path.");
        for line in [tag_line, links_line, heading_line, move_line] {
            assert!(!heron.contains(line), "{line}");
        }
        let links = prompt("Which notes link to projects/garden.md?");
        assert!(links.contains(
            "`(await mirai.notes.links({path: \"projects/garden.md\"})).backlinks.map(b => b.path)`"
        ));
        let heading =
            prompt("In projects/garden.md, rename the heading \"Plans\" to \"Spring plans\".");
        assert!(heading.contains(heading_line) && !heading.contains(move_line));
        let moving = prompt("Move ideas.md into the archive folder (archive/ideas.md).");
        assert!(moving.contains(move_line) && !moving.contains(heading_line));
        let typo_line = "- A spelling mistake: notes.edit on the misspelled word alone";
        let typo = prompt("Fix the typo in the heading of journal.md.");
        assert!(typo.contains(typo_line) && !typo.contains(heading_line));
        assert!(!heading.contains(typo_line));
        let long = prompt("What does handbook.md say about the fire door?");
        assert!(long.contains(
            "`(await mirai.notes.outline({path: \"handbook.md\"})).headings`, then `mirai.notes.read({path: \"handbook.md\", section: \"Part 3\"})`"
        ));
    }

    #[test]
    fn brief_rows_show_their_request_and_summary_alone_and_shared_fields_are_said_once() {
        let reference = api_reference(false);
        let diff = reference.find("mirai.notes.diff(").unwrap();
        let next = diff + reference[diff..].find("\nmirai.").unwrap();
        let brief = &reference[diff..next];
        assert!(!brief.contains("e.g.") && !brief.contains("->"), "{brief}");
        assert!(reference.contains("e.g. await mirai.notes.edit("));
        for field in SHARED_FIELDS {
            assert_eq!(
                reference.matches(&format!("  {field}: ")).count(),
                1,
                "{field} described once"
            );
        }
    }

    #[test]
    fn the_prompt_stays_within_its_token_budget() {
        // Every vault example shown, with long names: the largest prompt a task makes
        // (a typo's line shows instead of a heading's: each is tried).
        let all = Hints {
            note: Some(format!("projects/{}.md", "n".repeat(MAX_SHOWN_PATH - 12))),
            tag: Some("work/urgent-things".into()),
            tags: true,
            links: true,
            heading: true,
            moves: true,
            question: true,
            change: true,
            spelling: false,
            front_matter: true,
            quoted: Vec::new(),
            terms: Vec::new(),
        };
        let typo = Hints {
            spelling: true,
            ..all.clone()
        };
        for (read_only, dry_run, review, hints) in [
            (false, false, false, &all),
            (false, true, false, &all),
            (false, true, false, &typo),
            (true, false, false, &all),
            (false, false, true, &all),
        ] {
            let prompt = system_prompt(
                &PromptFacts {
                    read_only,
                    dry_run,
                    review,
                    ..facts()
                },
                hints,
            );
            let tokens = prompt_tokens(&prompt);
            if review {
                assert!(prompt.contains("Writes are proposed for a person to approve"));
            }
            println!(
                "prompt (read_only {read_only}, dry_run {dry_run}, review {review}): {} bytes, {} o200k tokens, {tokens} with the allowance, of {PROMPT_TOKEN_BUDGET}",
                prompt.len(),
                crate::ops::adapters::count_tokens(&prompt)
            );
            assert!(
                tokens <= PROMPT_TOKEN_BUDGET,
                "the prompt takes about {tokens} tokens ({} bytes); the budget is {PROMPT_TOKEN_BUDGET}: \
                 shorten summaries, field descriptions or examples",
                prompt.len()
            );
        }
        assert_eq!(prompt_tokens("hello world ".repeat(100).trim_end()), 220);
    }

    #[test]
    fn no_shape_or_field_description_carries_a_doc_link() {
        let link = regex::Regex::new(r"\[`[A-Za-z_:]+`\]").unwrap();
        for op in TABLE {
            for schema in [(op.request_schema)(), (op.committed_schema)()] {
                let text = schema.to_value().to_string();
                assert!(!link.is_match(&text), "{}: {text}", op.name);
            }
        }
    }

    #[test]
    fn read_only_prompts_leave_writes_out() {
        let prompt = system_prompt(
            &PromptFacts {
                read_only: true,
                ..facts()
            },
            &Hints::default(),
        );
        assert!(!prompt.contains("mirai.notes.write("));
        assert!(!prompt.contains("allow_large_delete"));
        assert!(prompt.contains("mirai.notes.read("));
        assert!(prompt.contains("search with mirai.index.query first"));
        assert!(prompt.contains("read-only"));
    }
}
