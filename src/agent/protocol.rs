//! The answer protocol between mirai and the model: `<think>…</think>`, then
//! `<code>…</code>` (JavaScript for the sandbox) and/or `<reply>…</reply>`.
//!
//! Parsing is forgiving where models are sloppy and strict where it matters:
//! a markdown fence inside `<code>` is unwrapped, a tag left open by a stop
//! sequence runs to the end of the answer, and anything after the code but a
//! reply right after it (a model writing the next turn itself) is dropped.

/// What the model asked for in one answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub think: Option<String>,
    pub code: Option<String>,
    pub reply: Option<String>,
}

/// Stop sequences sent with every request: the model's turn ends at its
/// reply, or where it starts writing an observation or a chat turn itself.
pub const STOP_SEQUENCES: [&str; 4] = ["</reply>", "<observation>", "<|im_start|>", "<|im_end|>"];

/// Why an answer cannot be acted on; the text goes back to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken(pub String);

pub fn parse(text: &str) -> Result<Answer, Broken> {
    let text = own_turn(text);
    let think = section(text, "think").map(|s| s.trim().to_string());
    let code = section(text, "code")
        .map(unfence)
        .filter(|code| !code.trim().is_empty());
    let reply = section(text, "reply")
        .map(|s| s.trim().to_string())
        .filter(|reply| !reply.is_empty());
    if code.is_none() && reply.is_none() {
        let why = if text.trim().is_empty() {
            "Your answer was empty."
        } else if text.contains("<code>") {
            "Your <code> block was empty."
        } else {
            "Your answer had neither a <code> block nor a <reply>."
        };
        return Err(Broken(format!(
            "{why} Answer with <think>your reasoning</think> and then either <code>JavaScript to run</code> or <reply>your final answer to the user</reply>."
        )));
    }
    Ok(Answer { think, code, reply })
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
    fn answers_without_tags_are_broken_with_a_corrective_message() {
        for text in [
            "Sure! I changed the note.",
            "",
            "<think>only thinking</think>",
            "<code>  </code>",
        ] {
            let Broken(message) = parse(text).unwrap_err();
            assert!(message.contains("<reply>"), "{text:?}: {message}");
        }
    }
}
