//! The answer protocol between mirai and the model: `<think>…</think>`, then
//! `<code>…</code>` (JavaScript for the sandbox) and/or `<reply>…</reply>`.
//!
//! Parsing is forgiving where models are sloppy and strict where it matters:
//! a markdown fence inside `<code>` is unwrapped, a JavaScript fence without
//! tags is the code, a tag left open by a stop sequence runs to the end of the
//! answer, and anything after the first code block but a reply right after it
//! (more code, an invented observation, a reply after code that never ran) is
//! dropped and handed back as [`Answer::dropped`], for the transcript. An
//! answer in plain words, with neither tag, is a reply ([`Answer::plain`]).

/// What the model asked for in one answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub think: Option<String>,
    pub code: Option<String>,
    pub reply: Option<String>,
    /// What followed the first code block and was dropped (not run, not kept).
    pub dropped: Option<String>,
    /// The reply was written in plain words, without `<reply>` tags.
    pub plain: bool,
}

/// Stop sequences sent with every request: the model's turn ends at its
/// reply, or where it starts writing an observation or a chat turn itself.
pub const STOP_SEQUENCES: [&str; 4] = ["</reply>", "<observation>", "<|im_start|>", "<|im_end|>"];

/// Why an answer cannot be acted on; the text goes back to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken(pub String);

pub fn parse(text: &str) -> Result<Answer, Broken> {
    let fenced = fenced_code(text);
    let text = match &fenced {
        Some(tagged) => tagged.as_str(),
        None => text,
    };
    let own = own_turn(text);
    let dropped = Some(text[own.len()..].trim())
        .filter(|rest| !rest.is_empty())
        .map(str::to_string);
    let think = section(own, "think").map(|s| s.trim().to_string());
    // A reply that opens before any code is the answer: a `<code>` inside it is
    // words (small models copy mirai's notes, which name the tags, into replies).
    let before_reply = own.find("<reply>").map_or(own, |at| &own[..at]);
    let code = section(before_reply, "code")
        .map(unfence)
        .filter(|code| !code.trim().is_empty());
    let mut reply = section(own, "reply")
        .map(|s| s.trim().to_string())
        .filter(|reply| !reply.is_empty());
    let mut plain = false;
    if code.is_none() && reply.is_none() {
        let words = without_think(own);
        if words.is_empty() || before_reply.contains("<code>") {
            let why = if own.trim().is_empty() {
                "Your answer was empty."
            } else if before_reply.contains("<code>") {
                "Your <code> block was empty."
            } else {
                "Your answer had only your reasoning."
            };
            return Err(Broken(format!(
                "{why} Answer with <think>your reasoning</think> and then either <code>JavaScript to run</code> or <reply>your final answer to the user</reply>."
            )));
        }
        reply = Some(words);
        plain = true;
    }
    Ok(Answer {
        think,
        code,
        reply,
        dropped,
        plain,
    })
}

/// Whether a reply in plain words reads as a thought the model has not
/// finished (a plan, or a sentence that announces something): such a reply
/// gets one reminder before it stands.
pub fn looks_unfinished(reply: &str) -> bool {
    const OPENINGS: [&str; 9] = [
        "let me",
        "i will",
        "i'll",
        "i need to",
        "i am going to",
        "i'm going to",
        "first",
        "next,",
        "to do this",
    ];
    let lower = reply.trim().to_lowercase();
    OPENINGS.iter().any(|opening| lower.starts_with(opening))
        || lower.ends_with(':')
        || lower.ends_with("...")
        || lower.ends_with('…')
}

/// Whether a reply says the notes hold nothing that answers ("there is no
/// note that mentions...", "I could not find..."): a negative answer, which
/// a run that never searched the notes has not earned.
pub fn says_none_found(reply: &str) -> bool {
    const NONE: [&str; 16] = [
        "there is no ",
        "there are no ",
        "no note ",
        "no notes ",
        "none of the notes",
        "could not find",
        "couldn't find",
        "did not find",
        "no such note",
        "does not contain",
        "doesn't contain",
        "does not mention",
        "doesn't mention",
        "no information",
        "nothing about",
        "no links",
    ];
    let lower = reply.to_lowercase();
    NONE.iter().any(|phrase| lower.contains(phrase))
}

/// An answer with no `<code>` tag whose JavaScript sits in a markdown fence
/// (```js or ```javascript): the same answer with that fence as its code.
fn fenced_code(text: &str) -> Option<String> {
    if text.contains("<code>") {
        return None;
    }
    let start = ["```javascript", "```js"]
        .iter()
        .filter_map(|fence| text.find(fence).map(|at| (at, fence.len())))
        .min()?;
    let body_start = start.0 + start.1;
    let end = text[body_start..].find("```").map(|at| body_start + at)?;
    Some(format!(
        "{}<code>{}</code>{}",
        &text[..start.0],
        &text[body_start..end],
        &text[end + 3..]
    ))
}

/// The answer without its `<think>` section, trimmed.
fn without_think(text: &str) -> String {
    match (text.find("<think>"), text.find("</think>")) {
        (Some(open), Some(close)) if open < close => {
            format!("{}{}", &text[..open], &text[close + "</think>".len()..])
                .trim()
                .to_string()
        }
        (Some(_), None) => String::new(),
        _ => text.trim().to_string(),
    }
}

/// The answer up to the end of its code, and of a `<reply>` that follows the
/// code directly: what is kept as the model's message in the conversation.
/// Anything else after the code is the model imitating what comes next (an
/// invented `User:` turn, or the worked examples' "(the observation shows
/// …)" with a result it made up), and it must not read that back as history.
pub fn own_turn(text: &str) -> &str {
    let Some(code_end) = text.find("</code>") else {
        return text;
    };
    let after = code_end + "</code>".len();
    let rest = &text[after..];
    let gap = rest.len() - rest.trim_start().len();
    if rest.trim_start().starts_with("<reply>") {
        let reply = &rest[gap..];
        return match reply.find("</reply>") {
            Some(end) => &text[..after + gap + end + "</reply>".len()],
            None => text,
        };
    }
    &text[..after]
}

/// The text inside the first `<tag>…</tag>`; an unclosed tag runs to the end
/// of the answer (a stop sequence may have cut its closing tag).
fn section<'a>(text: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = text.find(&open)? + open.len();
    let rest = &text[start..];
    Some(match rest.find(&close) {
        Some(end) => &rest[..end],
        None => rest,
    })
}

/// Unwraps a markdown code fence (```js … ```) around the code, if there is one.
fn unfence(code: &str) -> String {
    let trimmed = code.trim();
    let Some(after_ticks) = trimmed.strip_prefix("```") else {
        return trimmed.to_string();
    };
    // The fence's info string (js, javascript, ...) runs to the end of its line.
    let body = after_ticks.split_once('\n').map_or("", |(_, body)| body);
    let body = body.trim_end();
    body.strip_suffix("```").unwrap_or(body).trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_that_nothing_was_found_is_recognised() {
        assert!(says_none_found("There is no note that mentions a heron."));
        assert!(says_none_found("I could not find anything about it."));
        assert!(!says_none_found(
            "journal.md mentions a heron: \"Saw a blue heron.\""
        ));
        assert!(!says_none_found("Note renamed."));
        // From real runs: a backlinks answer denied, a long note's answer missed.
        assert!(says_none_found(
            "There are no links to projects/garden.md in this note."
        ));
        assert!(says_none_found(
            "The handbook.md file does not contain any information about the fire door."
        ));
    }

    #[test]
    fn think_and_code() {
        let answer = parse("<think>look first</think>\n<code>\nreturn 1\n</code>").unwrap();
        assert_eq!(answer.think.as_deref(), Some("look first"));
        assert_eq!(answer.code.as_deref(), Some("return 1"));
        assert_eq!(answer.reply, None);
    }

    #[test]
    fn a_fence_inside_code_is_unwrapped() {
        let answer = parse("<code>```javascript\nconst a = 1;\nreturn a;\n```</code>").unwrap();
        assert_eq!(answer.code.as_deref(), Some("const a = 1;\nreturn a;"));
        let answer = parse("<code>\n```\nreturn 2\n```\n</code>").unwrap();
        assert_eq!(answer.code.as_deref(), Some("return 2"));
    }

    #[test]
    fn code_and_reply_in_one_answer_keep_both() {
        let answer = parse("<think>t</think><code>return 1</code><reply>done</reply>").unwrap();
        assert_eq!(answer.code.as_deref(), Some("return 1"));
        assert_eq!(answer.reply.as_deref(), Some("done"));
    }

    #[test]
    fn a_reply_cut_by_its_stop_sequence_runs_to_the_end() {
        let answer = parse("<think>ok</think>\n<reply>The note is updated.").unwrap();
        assert_eq!(answer.reply.as_deref(), Some("The note is updated."));
    }

    #[test]
    fn text_imitating_the_next_turn_is_dropped() {
        let answer = parse(
            "<code>return await mirai.notes.list()</code>\nUser: here is the result\n<reply>All done!</reply>",
        )
        .unwrap();
        assert_eq!(
            answer.code.as_deref(),
            Some("return await mirai.notes.list()")
        );
        assert_eq!(
            answer.reply, None,
            "a reply written after an invented turn is not the model's"
        );
    }

    #[test]
    fn an_imagined_observation_after_the_code_is_dropped_with_any_reply_after_it() {
        let text = "<code>return (await mirai.notes.list()).length</code>\n(the observation shows 3 notes)\n<reply>There are 3 notes.</reply>";
        assert_eq!(
            own_turn(text),
            "<code>return (await mirai.notes.list()).length</code>"
        );
        assert_eq!(parse(text).unwrap().reply, None);
        let both = "<code>return 1</code>\n\n<reply>done</reply>\nUser: thanks";
        assert_eq!(
            own_turn(both),
            "<code>return 1</code>\n\n<reply>done</reply>"
        );
        let open = "<code>return 1</code> <reply>cut by its stop sequence";
        assert_eq!(own_turn(open), open);
        assert_eq!(own_turn("<reply>no code</reply>"), "<reply>no code</reply>");
    }

    #[test]
    fn empty_answers_are_broken_with_a_corrective_message() {
        for text in ["", "<think>only thinking</think>", "<code>  </code>"] {
            let Broken(message) = parse(text).unwrap_err();
            assert!(message.contains("<reply>"), "{text:?}: {message}");
        }
    }

    #[test]
    fn a_reply_that_names_the_code_tag_is_a_reply() {
        let answer =
            parse("<reply>Only your first <code> block ran; what you wrote after it was dropped.")
                .unwrap();
        assert_eq!(answer.code, None);
        assert_eq!(
            answer.reply.as_deref(),
            Some("Only your first <code> block ran; what you wrote after it was dropped.")
        );
        assert!(!answer.plain);
    }

    #[test]
    fn plain_words_are_a_reply() {
        let answer =
            parse("<think>read-only</think>The deployment is read-only: nothing was changed.")
                .unwrap();
        assert!(answer.plain);
        assert_eq!(answer.code, None);
        assert_eq!(
            answer.reply.as_deref(),
            Some("The deployment is read-only: nothing was changed.")
        );
        assert!(!looks_unfinished(answer.reply.as_deref().unwrap()));
        for unfinished in [
            "Let me read the note first.",
            "I will now do this:",
            "Reading...",
        ] {
            assert!(looks_unfinished(unfinished), "{unfinished}");
        }
    }

    #[test]
    fn a_javascript_fence_without_tags_is_the_code() {
        let answer = parse(
            "I'll list them.\n```javascript\nreturn await mirai.notes.list();\n```\nThen reply.",
        )
        .unwrap();
        assert_eq!(
            answer.code.as_deref(),
            Some("return await mirai.notes.list();")
        );
        assert_eq!(answer.dropped.as_deref(), Some("Then reply."));
        assert!(!answer.plain);
    }

    #[test]
    fn only_the_first_code_block_runs_and_the_rest_is_dropped() {
        let answer = parse(
            "<code>return 1</code>\n(the observation shows a commit)\n<code>return 2</code>\n<reply>Done.</reply>",
        )
        .unwrap();
        assert_eq!(answer.code.as_deref(), Some("return 1"));
        assert_eq!(answer.reply, None);
        assert_eq!(
            answer.dropped.as_deref(),
            Some("(the observation shows a commit)\n<code>return 2</code>\n<reply>Done.</reply>")
        );
        assert_eq!(
            parse("<code>return 1</code><reply>ok</reply>")
                .unwrap()
                .dropped,
            None
        );
    }
}
