//! One agent run: the loop, its bounds, the observations the model sees, and
//! the report the caller gets.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::llm::Message;
use super::prompt::{system_prompt, PromptFacts};
use super::protocol::{self, Broken};
use super::transcript::{Event, Transcript};
use super::warnings::{self, Outcome};
use super::{Agent, OBSERVATION_CAP};
use crate::config::{PolicyMode, MAX_AGENT_STEPS};
use crate::error::{Error, ErrorCode, Result};
use crate::notes::overlay::{NoteChange, Overlay};
use crate::ops::{Class, Context};
use crate::sandbox::{CallRecord, Evaluation};

/// What `POST /agent/run` takes.
#[derive(Debug, Clone, Deserialize)]
pub struct RunRequest {
    pub task: String,
    #[serde(default)]
    pub max_steps: Option<usize>,
    #[serde(default)]
    pub dry_run: bool,
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stopped {
    Reply,
    MaxSteps,
    Deadline,
    LlmError,
    ProtocolError,
}

/// One answer of the model and what came of it.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub think: Option<String>,
    pub code: Option<String>,
    pub result: Value,
    pub error: Option<Error>,
    pub console: Vec<String>,
    pub calls: Vec<CallRecord>,
    pub llm_ms: f64,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// What `POST /agent/run` answers.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub run_id: String,
    pub reply: Option<String>,
    pub stopped: Stopped,
    /// Why the run stopped, in words, when it was not a reply.
    pub stop_detail: Option<String>,
    pub steps: Vec<Step>,
    pub commits: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changes: Option<Vec<NoteChange>>,
    pub usage: Usage,
    /// Where the reply and the run disagree, in plain words (see [`super::warnings`]).
    pub warnings: Vec<String>,
}

impl Agent {
    /// Refuses a run that cannot start (bad request, no model configured);
    /// answers its step budget.
    pub fn check(&self, request: &RunRequest) -> Result<usize> {
        if request.task.trim().is_empty() {
            return Err(Error::new(
                ErrorCode::InvalidRequest,
                "task is empty: say what the agent should do with the notes",
            ));
        }
        let max_steps = request.max_steps.unwrap_or(self.limits.default_steps);
        if !(1..=MAX_AGENT_STEPS).contains(&max_steps) {
            return Err(Error::new(
                ErrorCode::InvalidRequest,
                format!("max_steps must be from 1 to {MAX_AGENT_STEPS}, not {max_steps}"),
            ));
        }
        if !self.llm.config().is_configured() {
            return Err(Error::new(
                ErrorCode::LlmUnavailable,
                "no model is configured: set MIRAI_LLM_API_KEY (or OPENAI_API_KEY) for the OpenAI API, \
                 or MIRAI_LLM_BASE_URL (and MIRAI_LLM_MODEL) for another OpenAI-compatible server",
            ));
        }
        Ok(max_steps)
    }

    /// Runs `request` against `ctx`, telling `listener` every event as it
    /// happens. An `Err` means the run could not start (bad request, no model).
    pub fn run(
        &self,
        ctx: &Context,
        request: &RunRequest,
        listener: &mut dyn FnMut(&Event),
    ) -> Result<RunReport> {
        let max_steps = self.check(request)?;
        let task = request.task.trim();
        let deadline = Instant::now() + Duration::from_millis(self.limits.deadline_ms);
        let run_id = uuid::Uuid::now_v7().to_string();
        let overlay = request.dry_run.then(|| Arc::new(Overlay::new()));
        let run_ctx = match &overlay {
            Some(overlay) => ctx.dry_run(Arc::clone(overlay)),
            None => ctx.for_run(&run_id),
        };
        let facts = PromptFacts {
            max_steps,
            deadline_ms: self.limits.deadline_ms,
            sandbox: self.sandbox.limits(),
            observation_cap: OBSERVATION_CAP,
            dry_run: request.dry_run,
            // The prompt describes the policy the run's calls will meet: the context's.
            read_only: ctx.policy == PolicyMode::ReadOnly,
        };
        let mut messages = vec![Message::system(system_prompt(&facts)), Message::user(task)];
        // What the reply is checked against at the end: a note the run deletes is no invention.
        let notes_before: HashSet<String> = run_ctx
            .view
            .list()
            .map(|notes| notes.into_iter().collect())
            .unwrap_or_default();
        let mut transcript = Transcript::create(&self.runs, &run_id, listener);
        transcript.record(
            "run_start",
            json!({"run_id": run_id, "task": task, "max_steps": max_steps,
                   "dry_run": request.dry_run, "model": self.llm.config().model}),
        );

        let mut run = Progress::default();
        let stopped = loop {
            if run.steps.len() >= max_steps {
                run.stop_detail = Some(format!(
                    "the model did not reply within {max_steps} steps (max_steps)"
                ));
                break Stopped::MaxSteps;
            }
            if Instant::now() >= deadline {
                run.stop_detail = Some(deadline_passed(self.limits.deadline_ms));
                break Stopped::Deadline;
            }
            let step = run.steps.len() + 1;
            transcript.record(
                "llm_request",
                json!({"step": step, "messages": messages.len(),
                       "last": messages.last().map(|m| m.content.as_str())}),
            );
            let completion = match self.llm.complete(&messages, deadline) {
                Ok(completion) => completion,
                Err(e) if run.steps.is_empty() => {
                    let message = format!(
                        "the model cannot be reached: {e}; check MIRAI_LLM_BASE_URL ({}), MIRAI_LLM_MODEL ({}) and the key (MIRAI_LLM_API_KEY or OPENAI_API_KEY)",
                        crate::redact::urls(&self.llm.config().base_url),
                        self.llm.config().model
                    );
                    transcript.record(
                        "run_end",
                        json!({"stopped": "llm_unavailable", "error": message}),
                    );
                    return Err(Error::new(ErrorCode::LlmUnavailable, message));
                }
                Err(e) => {
                    run.stop_detail = Some(e.to_string());
                    break if Instant::now() >= deadline {
                        Stopped::Deadline
                    } else {
                        Stopped::LlmError
                    };
                }
            };
            run.usage.prompt_tokens += completion.prompt_tokens;
            run.usage.completion_tokens += completion.completion_tokens;
            transcript.record(
                "llm_response",
                json!({"step": step, "content": completion.content, "ms": round(completion.ms),
                       "prompt_tokens": completion.prompt_tokens,
                       "completion_tokens": completion.completion_tokens}),
            );
            // An invented next turn is not kept: the model should not read it back as history.
            messages.push(Message::assistant(protocol::own_turn(&completion.content)));
            let llm_ms = round(completion.ms);

            let answer = match protocol::parse(&completion.content) {
                Ok(answer) => answer,
                Err(Broken(correction)) => {
                    run.steps.push(Step {
                        think: None,
                        code: None,
                        result: Value::Null,
                        error: Some(Error::new(ErrorCode::ProtocolError, correction.clone())),
                        console: Vec::new(),
                        calls: Vec::new(),
                        llm_ms,
                    });
                    run.broken_in_a_row += 1;
                    if run.broken_in_a_row >= 2 {
                        run.stop_detail =
                            Some("the model broke the answer protocol twice in a row".to_string());
                        break Stopped::ProtocolError;
                    }
                    messages.push(Message::user(correction));
                    continue;
                }
            };
            run.broken_in_a_row = 0;
            let Some(code) = answer.code else {
                run.steps.push(Step {
                    think: answer.think,
                    code: None,
                    result: Value::Null,
                    error: None,
                    console: Vec::new(),
                    calls: Vec::new(),
                    llm_ms,
                });
                run.reply = answer.reply;
                break Stopped::Reply;
            };
            transcript.record("code_start", json!({"step": step, "code": code}));
            let evaluation = self.sandbox.run(&run_ctx, &code);
            for call in &evaluation.calls {
                transcript.record(
                    "host_call",
                    json!({"step": step, "op": call.op, "ok": call.ok, "ms": call.ms}),
                );
            }
            transcript.record(
                "code_end",
                json!({"step": step, "result": evaluation.result, "error": evaluation.error,
                       "console": evaluation.console, "stats": evaluation.stats}),
            );
            run.commits.extend(evaluation.commits.iter().cloned());
            let failed = evaluation.error.is_some();
            let mut observation = observe(&evaluation, run.commits.len(), request.dry_run);
            let repeated = run.steps.last().is_some_and(|last| {
                last.code.as_deref() == Some(code.as_str()) && last.error.is_some()
            });
            if failed && repeated {
                // Small models resend a failing call unchanged until the steps run out.
                observation.push_str(
                    "\nThis is the same code as your previous answer, and it failed again: change the approach.",
                );
            }
            run.steps.push(Step {
                think: answer.think,
                code: Some(code),
                result: evaluation.result,
                error: evaluation.error,
                console: evaluation.console,
                calls: evaluation.calls,
                llm_ms,
            });
            if answer.reply.is_some() {
                if !failed {
                    run.reply = answer.reply;
                    break Stopped::Reply;
                }
                // A reply written before its code ran cannot know the code failed.
                observation.push_str(
                    "\nYour <reply> was not given to the user: it was written before the code ran, and the code failed. \
                     Fix the code, or reply again once you know the outcome.",
                );
            }
            messages.push(Message::user(observation));
        };

        let changes = overlay.map(|overlay| overlay.changes());
        let warnings = match &run.reply {
            Some(reply) => warnings::check(
                reply,
                &Outcome {
                    task,
                    wrote: !run.commits.is_empty()
                        || changes.as_ref().is_some_and(|c| !c.is_empty()),
                    read_only: facts.read_only,
                    write_calls: run
                        .steps
                        .iter()
                        .flat_map(|step| &step.calls)
                        .filter(|call| is_write(&call.op))
                        .map(|call| (call.op.as_str(), call.ok))
                        .collect(),
                    notes_before: &notes_before,
                    notes_after: &run_ctx.view.list().unwrap_or_default(),
                },
            ),
            None => Vec::new(),
        };
        let report = RunReport {
            run_id,
            reply: run.reply,
            stopped,
            stop_detail: run.stop_detail,
            steps: run.steps,
            commits: run.commits,
            changes,
            usage: run.usage,
            warnings,
        };
        transcript.record(
            "run_end",
            json!({"stopped": report.stopped, "reply": report.reply, "stop_detail": report.stop_detail,
                   "commits": report.commits, "changes": report.changes, "usage": report.usage,
                   "warnings": report.warnings}),
        );
        if let Some(problem) = &transcript.problem {
            log::warn!("run {} has no transcript: {problem}", report.run_id);
        }
        Ok(report)
    }
}

/// What a run has gathered so far.
#[derive(Default)]
struct Progress {
    steps: Vec<Step>,
    commits: Vec<String>,
    usage: Usage,
    reply: Option<String>,
    stop_detail: Option<String>,
    broken_in_a_row: usize,
}

fn deadline_passed(deadline_ms: u64) -> String {
    format!("the run passed its {deadline_ms} ms deadline (MIRAI_AGENT_DEADLINE_MS)")
}

fn round(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

/// The message the model gets after its code ran: the outcome as JSON, each
/// part capped at [`OBSERVATION_CAP`] bytes with the cut stated, how many
/// commits the run has made so far, and a plain sentence when writes failed.
pub(super) fn observe(evaluation: &Evaluation, commits_so_far: usize, dry_run: bool) -> String {
    let result_text = evaluation.result.to_string();
    let result = if result_text.len() > OBSERVATION_CAP {
        json!({
            "truncated": true,
            "bytes": result_text.len(),
            "preview": cut(&result_text, OBSERVATION_CAP),
            "note": format!("the result was {} bytes; observations show at most {OBSERVATION_CAP}: return less", result_text.len()),
        })
    } else {
        evaluation.result.clone()
    };
    let mut console = Vec::new();
    let mut console_bytes = 0;
    for (i, line) in evaluation.console.iter().enumerate() {
        if console_bytes + line.len() > OBSERVATION_CAP {
            console.push(Value::String(format!(
                "[{} more console lines cut: observations show at most {OBSERVATION_CAP} bytes of console]",
                evaluation.console.len() - i
            )));
            break;
        }
        console_bytes += line.len();
        console.push(Value::String(line.clone()));
    }
    let error = evaluation
        .error
        .as_ref()
        .map(|e| json!({"code": e.code, "message": cut(&e.message, OBSERVATION_CAP)}));
    let calls: Vec<Value> = evaluation
        .calls
        .iter()
        .map(|call| json!({"op": call.op, "ok": call.ok}))
        .collect();
    let failed_writes: Vec<&str> = evaluation
        .calls
        .iter()
        .filter(|call| !call.ok && is_write(&call.op))
        .map(|call| call.op.as_str())
        .collect();
    let mut body = json!({"result": result, "error": error, "console": console, "calls": calls});
    // Small models take "I read it" for "I changed it"; the count says what happened.
    if !dry_run {
        body["commits_so_far"] = json!(commits_so_far);
    }
    if !failed_writes.is_empty() {
        let calls = format!(
            "{} call{}",
            failed_writes.join(", "),
            if failed_writes.len() == 1 { "" } else { "s" }
        );
        // Small models copy this text into their reply: it says what to do
        // next, in words that make a poor reply.
        let denied = evaluation
            .error
            .as_ref()
            .is_some_and(|e| e.code == ErrorCode::PolicyDenied);
        body["note"] = Value::String(if denied {
            format!(
                "The {calls} changed nothing: this deployment is read-only and no write can succeed. \
                 Next: a <reply> telling the user the change could not be made."
            )
        } else {
            format!(
                "The {calls} changed nothing. Next: a <code> block that calls it again, fixed as the \
                 error message says (it often names the right path or the exact text)."
            )
        });
    }
    format!("<observation>\n{body}\n</observation>")
}

fn is_write(op: &str) -> bool {
    crate::ops::find(op).is_some_and(|entry| entry.class == Class::Write)
}

/// The first `max` bytes of `text`, at a character boundary.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}
