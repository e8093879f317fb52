//! `changes.apply`: several single-file diffs, each planned exactly as
//! `patch.apply` plans one (same codes and messages, prefixed `patch N: `),
//! landed together as one commit: all of them or none.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::change::{land_all, plan_patch, status_lines, Plan};
use super::guard::GuardPolicy;
use super::patch::{summary, PatchSummary};
use super::{Class, Context, HttpInput, HttpRoute, Operation, PromptDetail};
use crate::error::{Error, ErrorCode, Result};
use crate::patch::Budget;

/// `changes.apply`'s request.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ChangesRequest {
    /// Single-file unified diffs (1 to MIRAI_CHANGES_MAX_PATCHES), at most one per note.
    pub patches: Vec<String>,
    /// Said in the commit's body, after its subject: no control characters and
    /// no line that looks like a git trailer (`Token: value`).
    #[serde(default)]
    pub message: Option<String>,
    /// Refuse (conflict) when any of the notes changed between this commit and HEAD.
    #[serde(default)]
    pub base_commit: Option<String>,
    /// Pass the shrink guard: a patch may cut more than half of a long note.
    #[serde(default)]
    pub allow_large_delete: bool,
}

/// What a multi-note change did: the commit and each note's summary, in the
/// order they were given.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ChangesApplied {
    /// `null` only in a dry run, where nothing is committed.
    pub commit: Option<String>,
    pub changes: Vec<PatchSummary>,
}

/// `changes.apply`: apply several notes' diffs as one commit.
pub struct ChangesApply;

impl Operation for ChangesApply {
    const NAME: &'static str = "changes.apply";
    const EXAMPLE: &'static str = r##"await mirai.changes.apply({patches: ["--- a/shop/list.md\n+++ b/shop/list.md\n@@ -1 +1,2 @@\n # Shopping\n+- pears\n", "--- /dev/null\n+++ b/shop/bought.md\n@@ -0,0 +1 @@\n+# Bought\n"], message: "Plan the shopping"})"##;
    const CLASS: Class = Class::Write;
    const SUMMARY: &'static str =
        "Several single-file diffs (one per note) as ONE commit, each checked as patch.apply checks one; all or nothing.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::post("/mcp/changes/apply", HttpInput::Body);
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = ChangesRequest;
    type Response = ChangesApplied;

    fn run(ctx: &Context, request: ChangesRequest) -> Result<ChangesApplied> {
        let count = request.patches.len();
        if count == 0 || count > ctx.max_changes {
            return Err(Error::new(
                ErrorCode::InvalidRequest,
                format!(
                    "{count} patches in one call; give 1 to {} (MIRAI_CHANGES_MAX_PATCHES), one per note",
                    ctx.max_changes
                ),
            ));
        }
        let message = request.message.as_deref().map(check_message).transpose()?;
        let guard = GuardPolicy::for_write(ctx, request.allow_large_delete);
        let (plans, commit) = land_all(
            ctx,
            request.base_commit.as_deref(),
            |ctx, budget| plan_all(ctx, &request.patches, &guard, budget),
            |plans| {
                let subject = match plans.len() {
                    1 => "mcp.changes_apply: 1 note".to_string(),
                    n => format!("mcp.changes_apply: {n} notes"),
                };
                let body = match &message {
                    Some(text) => format!("{text}\n\n{}", status_lines(plans)),
                    None => status_lines(plans),
                };
                ctx.commit_message(&subject, &body)
            },
        )?;
        Ok(ChangesApplied {
            commit,
            changes: plans.iter().map(summary).collect(),
        })
    }
}

/// Plans every patch as `patch.apply` would, naming the failing one.
fn plan_all(
    ctx: &Context,
    patches: &[String],
    guard: &GuardPolicy,
    budget: &Budget,
) -> Result<Vec<Plan>> {
    let numbered =
        |n: usize, e: Error| Error::new(e.code, format!("patch {}: {}", n + 1, e.message));
    let mut plans: Vec<Plan> = Vec::with_capacity(patches.len());
    let mut seen: HashMap<String, usize> = HashMap::with_capacity(patches.len());
    for (n, text) in patches.iter().enumerate() {
        let plan = plan_patch(ctx, text, guard, budget).map_err(|e| numbered(n, e))?;
        if let Some(first) = seen.insert(plan.note.rel.clone(), n) {
            return Err(numbered(
                n,
                Error::new(
                    ErrorCode::InvalidRequest,
                    format!(
                        "{} is already changed by patch {}; put both changes in one diff",
                        plan.note.rel,
                        first + 1
                    ),
                ),
            ));
        }
        plans.push(plan);
    }
    Ok(plans)
}

/// The caller's message, trimmed, once it is safe to put in a commit: no
/// control characters but newlines and tabs, and no line git could take for a
/// trailer (which could forge `Mirai-Run`).
pub(super) fn check_message(message: &str) -> Result<String> {
    let refuse = |why: String| Error::new(ErrorCode::InvalidRequest, why);
    if let Some(c) = message
        .chars()
        .find(|c| c.is_control() && !matches!(c, '\n' | '\t'))
    {
        return Err(refuse(format!(
            "message holds the control character U+{:04X}; only newlines and tabs are allowed",
            u32::from(c)
        )));
    }
    for (n, line) in message.lines().enumerate() {
        if looks_like_trailer(line) {
            return Err(refuse(format!(
                "message line {} ({line:?}) looks like a git trailer (`Token: value`), which \
                 could be read as one of the commit's own (such as Mirai-Run); reword it",
                n + 1
            )));
        }
    }
    Ok(message.trim().to_string())
}

/// `Token: value` as git's trailer parser reads it: letters, digits and
/// dashes, maybe spaces, then a colon.
fn looks_like_trailer(line: &str) -> bool {
    let Some((token, _)) = line.split_once(':') else {
        return false;
    };
    let token = token.trim_end();
    !token.is_empty()
        && !token.starts_with('-')
        && token.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_with_control_characters_or_trailer_lines_are_refused() {
        assert_eq!(
            check_message("  Tidy the garden notes.\n\n\tTwo paragraphs.\n").unwrap(),
            "Tidy the garden notes.\n\n\tTwo paragraphs."
        );
        assert!(check_message("Note: in prose").is_err());
        for bad in [
            "ok\nMirai-Run: 0190a0c0-0000-7000-8000-000000000000",
            "Signed-off-by: someone",
            "Co-authored-by : x",
            "https://example.com",
            "bell\u{7}",
            "cr\r\nlf",
        ] {
            let err = check_message(bad).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidRequest, "{bad:?}");
        }
        for good in [
            "no colon here",
            "a sentence: with a space before the word",
            ":leading colon",
            "- list item: fine",
        ] {
            assert!(check_message(good).is_ok(), "{good:?}");
        }
    }
}
