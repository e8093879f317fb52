//! One agent run: the loop, its bounds, the observations the model sees, and
//! the report the caller gets, led by the run's `outcome` from mirai's record
//! (see [`super::outcome`]). A reply that contradicts the record gets one more
//! step with the facts; if the next reply still does, the report marks it
//! `reply_contradicted`. In review mode the run's writes gather into one
//! proposal (filed when it ends, in the report's `proposal`), and a proposed
//! write is observed as a dry run's write is.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::hints::{self, Hints};
use super::llm::Message;
use super::outcome::{self, contradiction, facts_message, failed_write, Kind, RunOutcome};
use super::prompt::{self, system_prompt, PromptFacts};
use super::protocol::{self, Broken};
use super::suggest;
use super::transcript::{Event, Transcript};
use super::warnings::{self, claimed_change, Outcome};
use super::{Agent, MAX_AGENT_STEPS, OBSERVATION_CAP};
use crate::error::{Error, ErrorCode, Result};
use crate::events::Events;
use crate::ops::adapters::{NoteChange, Overlay};
use crate::ops::{
    begin_draft, file_draft, proposes, Class, Context, Draft, Input, PolicyMode, Proposed,
};
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
    /// A reply not given to the user: one right after a failed step with
    /// nothing written yet, or one in plain words that read as unfinished;
    /// the model was asked to go on (once per run each).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_reply: Option<String>,
    /// A reply that contradicted mirai's record: not given to the user; the
    /// model was told the facts and had one more step (once per run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contested_reply: Option<String>,
    /// What the answer wrote after its first code block, dropped unrun.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped: Option<String>,
    /// Why the step's code was not run: it was an earlier step's code whose
    /// write had succeeded, and running it again would make the change twice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_run: Option<String>,
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
    /// What the run did, from mirai's record; the answer leads with it.
    pub outcome: RunOutcome,
    /// The reply claims a change the record does not show (or calls a proposed
    /// change done), even after the model was told the facts: read `outcome`.
    pub reply_contradicted: bool,
    pub reply: Option<String>,
    pub stopped: Stopped,
    /// Why the run stopped, in words, when it was not a reply.
    pub stop_detail: Option<String>,
    /// mirai's own look before the model's first answer (its code run
    /// read-only; its observation sent after the task): absent when the task
    /// named no note there is, no tag and asked no question.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opening: Option<Step>,
    pub steps: Vec<Step>,
    pub commits: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changes: Option<Vec<NoteChange>>,
    /// Review mode: the one proposal the run's writes made (filed when it
    /// ended); absent when it proposed nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proposal: Option<Proposed>,
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
        let ctx = &ctx.via("agent");
        let writes = Writes::for_run(ctx, &run_id, request.dry_run)?;
        let (draft, overlay, run_ctx) = (&writes.draft, &writes.overlay, &writes.ctx);
        let landing = match (draft, request.dry_run) {
            (Some(_), _) => Landing::Proposed,
            (None, true) => Landing::Aside,
            (None, false) => Landing::Committed,
        };
        let facts = PromptFacts {
            max_steps,
            deadline_ms: self.limits.deadline_ms,
            sandbox: self.sandbox.limits(),
            observation_cap: OBSERVATION_CAP,
            dry_run: request.dry_run,
            // The prompt describes the policy the run's calls will meet: the context's.
            read_only: ctx.policy == PolicyMode::ReadOnly,
            review: draft.is_some(),
        };
        let hints = Hints::of(task);
        let messages = vec![
            Message::system(system_prompt(&facts, &hints)),
            Message::user(task),
        ];
        // What the reply is checked against at the end: a note the run deletes is no invention.
        let notes_before: HashSet<String> = run_ctx
            .view
            .list()
            .map(|notes| notes.into_iter().collect())
            .unwrap_or_default();
        let seen = Seen {
            ctx,
            run_id: &run_id,
            task,
            notes_before: &notes_before,
        };
        let starter = ctx.caller().map(|c| c.name.clone());
        let mut telling = telling_the_stream(ctx.events.clone(), run_id.clone(), starter, listener);
        let mut transcript = Transcript::create(&self.runs, &run_id, &mut telling);
        transcript.record(
            "run_start",
            json!({"run_id": run_id, "task": task, "max_steps": max_steps,
                   "dry_run": request.dry_run, "model": self.llm.config().model,
                   "caller": ctx.caller().map(|c| c.name.as_str())}),
        );

        let mut talk = Talk {
            messages,
            run: Progress::default(),
            transcript,
        };
        if let Some(opened) = self.open(&mut talk, run_ctx, task, &hints, facts.read_only, landing)
        {
            talk.messages[1] = Message::user(opened);
        }
        let stopped = loop {
            if let Some(stopped) =
                talk.run
                    .out_of_budget(max_steps, deadline, self.limits.deadline_ms)
            {
                break stopped;
            }
            let (content, llm_ms) = match self.ask(&mut talk, deadline)? {
                Ok(asked) => asked,
                Err(stopped) => break stopped,
            };
            let answer = match protocol::parse(&content) {
                Ok(answer) => answer,
                Err(Broken(correction)) => {
                    if talk.run.broke_protocol(&correction, llm_ms) {
                        break Stopped::ProtocolError;
                    }
                    talk.messages.push(Message::user(correction));
                    continue;
                }
            };
            talk.run.broken_in_a_row = 0;
            if let Some(dropped) = &answer.dropped {
                let step = talk.run.steps.len() + 1;
                talk.transcript.record(
                    "dropped",
                    json!({"step": step, "text": dropped, "why": DROPPED}),
                );
            }
            let Some(code) = answer.code else {
                let reply = answer.reply.clone().unwrap_or_default();
                // A plain answer before anything was looked at (mirai's opening look
                // answers a question or a named note before the model's first answer).
                let nothing_ran = talk.run.opening.is_none()
                    && talk.run.steps.iter().all(|step| step.code.is_none());
                let remind = answer.plain
                    && !talk.run.reminded
                    && talk.run.steps.len() + 1 < max_steps
                    && (nothing_ran || protocol::looks_unfinished(&reply));
                let parroted = !talk.run.held_a_reply
                    && talk.run.steps.len() + 1 < max_steps
                    && parrots(&reply, &talk.messages);
                // A reply that nothing was found, right after code that found something
                // (or after mirai's opening look found it).
                let denies = !talk.run.held_a_reply
                    && talk.run.steps.len() + 1 < max_steps
                    && protocol::says_none_found(&reply)
                    && talk.run.found(&hints).is_some();
                // In a read-only run, a reply to a request for a change that does not say why
                // nothing can change (small models answer "No note found to delete.").
                let unsaid = facts.read_only
                    && hints.change
                    && !talk.run.held_a_reply
                    && talk.run.steps.len() + 1 < max_steps
                    && !says_read_only(&reply)
                    // A claimed change is contested with the record, which says read-only.
                    && claimed_change(&reply).is_none();
                // A reply to a request for a change, with nothing changed, that neither
                // claims one (a claim is contested) nor says why it was not made.
                let not_made = !facts.read_only
                    && hints.change
                    && !talk.run.held_a_reply
                    && talk.run.steps.len() + 1 < max_steps
                    && talk.run.changed_nothing(overlay)
                    && claimed_change(&reply).is_none()
                    && talk.run.code_claim.is_none()
                    && !says_why_not(&reply);
                let held_for = match (remind, parroted, denies, unsaid, not_made) {
                    (true, ..) => None,
                    (false, true, ..) => Some(Held::Parroted),
                    (false, false, true, ..) => Some(Held::DeniesItsResult),
                    (false, false, false, true, _) => Some(Held::ReadOnlyUnsaid),
                    (false, false, false, false, true) => Some(Held::ChangeNotMade),
                    (false, false, false, false, false) => {
                        talk.run
                            .may_hold_a_reply(max_steps, overlay, facts.read_only)
                    }
                };
                let hold = remind || held_for.is_some();
                if talk
                    .run
                    .replied(answer.think, answer.reply, answer.dropped, llm_ms, hold)
                {
                    if self.contest(&mut talk, &writes, &seen) {
                        continue;
                    }
                    break Stopped::Reply;
                }
                let step = talk.run.steps.len();
                let (why, next) = if remind {
                    talk.run.reminded = true;
                    // Small models copy a call they are shown: one for this task.
                    let next = match nothing_ran {
                        true => format!(
                            "{UNFINISHED} A first step for this task: {}",
                            first_call(run_ctx, task).shown()
                        ),
                        false => UNFINISHED.to_string(),
                    };
                    ("unfinished", next)
                } else {
                    talk.run.held_a_reply = true;
                    match held_for {
                        Some(Held::AfterNulls) => ("after_a_null_result", ONLY_NULLS.to_string()),
                        Some(Held::Parroted) => {
                            ("parroted", parroted_message(task, facts.read_only))
                        }
                        Some(Held::DeniesItsResult) => {
                            ("denies_its_result", denied_message(&talk.run, &hints))
                        }
                        Some(Held::ReadOnlyUnsaid) => {
                            ("read_only_unsaid", READ_ONLY_UNSAID.to_string())
                        }
                        Some(Held::ChangeNotMade) => {
                            ("change_not_made", CHANGE_NOT_MADE.to_string())
                        }
                        _ => ("after_a_failed_step", TRY_AGAIN.to_string()),
                    }
                };
                talk.transcript.record(
                    "reply_held",
                    json!({"step": step, "reply": talk.run.held(), "why": why}),
                );
                talk.messages.push(Message::user(next));
                continue;
            };
            let ran = Ran {
                think: answer.think,
                code,
                reply: answer.reply,
                dropped: answer.dropped,
                llm_ms,
            };
            if let Some(stopped) = self.run_code(&mut talk, run_ctx, task, ran, landing) {
                if stopped == Stopped::Reply && self.contest(&mut talk, &writes, &seen) {
                    continue;
                }
                break stopped;
            }
            // The same code answering nothing twice: small models send it until the
            // steps run out. Once per run, mirai looks for them (its observation shown).
            if talk.run.repeats > 0
                && !talk.run.looked_again
                && talk.run.steps.last().is_some_and(answered_nothing)
            {
                talk.run.looked_again = true;
                let next = self.look_again(&mut talk, run_ctx, task, landing);
                talk.messages.pop();
                talk.messages.push(Message::user(next));
            }
        };
        let Talk {
            mut run,
            transcript,
            ..
        } = talk;
        let mut transcript = transcript;
        // A run that stopped right after its reply was contested (out of time, or the
        // model unreachable) keeps that reply: it is marked as the record contradicts it.
        if run.reply.is_none() {
            run.reply = run
                .steps
                .last()
                .and_then(|step| step.contested_reply.clone());
        }

        let report = finish(ctx, writes, task, &notes_before, run_id, run, stopped);
        transcript.record(
            "run_end",
            json!({"outcome": report.outcome, "reply_contradicted": report.reply_contradicted,
                   "stopped": report.stopped, "reply": report.reply, "stop_detail": report.stop_detail,
                   "commits": report.commits, "changes": report.changes,
                   "proposal": report.proposal.as_ref().map(|p| &p.proposal), "usage": report.usage,
                   "warnings": report.warnings}),
        );
        if let Some(problem) = &transcript.problem {
            log::warn!("run {} has no transcript: {problem}", report.run_id);
        }
        Ok(report)
    }

    /// One request to the model: recorded with its answer, the tokens
    /// counted, the answer kept as the model's turn. `Ok(Err(_))` when the run
    /// stops here; `Err` when the model was never reached at all.
    fn ask(
        &self,
        talk: &mut Talk<'_>,
        deadline: Instant,
    ) -> Result<std::result::Result<(String, f64), Stopped>> {
        let Talk {
            messages,
            run,
            transcript,
        } = talk;
        let step = run.steps.len() + 1;
        transcript.record(
            "llm_request",
            json!({"step": step, "messages": messages.len(),
                   "last": messages.last().map(|m| m.content.as_str())}),
        );
        let temperature = if run.repeats > 0 {
            REPEAT_TEMPERATURE
        } else {
            0.0
        };
        let completion = match self.llm.complete(messages, deadline, temperature) {
            Ok(completion) => completion,
            Err(e) if run.steps.is_empty() => {
                return Err(self.unreachable(&e.to_string(), transcript))
            }
            Err(e) => {
                run.stop_detail = Some(e.to_string());
                return Ok(Err(if Instant::now() >= deadline {
                    Stopped::Deadline
                } else {
                    Stopped::LlmError
                }));
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
        Ok(Ok((completion.content, round(completion.ms))))
    }

    /// Runs an answer's code and tells the model what came of it: the step
    /// recorded, its observation (or, for a repeat, the first try's again)
    /// added to the messages. `Some` when the answer's reply ends the run.
    fn run_code(
        &self,
        talk: &mut Talk<'_>,
        run_ctx: &Context,
        task: &str,
        ran: Ran,
        landing: Landing,
    ) -> Option<Stopped> {
        let Talk {
            messages,
            run,
            transcript,
        } = talk;
        let step = run.steps.len() + 1;
        if let Some(why) = done_before(&run.steps, &ran.code) {
            // Small models send a write that succeeded again: a line appended twice.
            transcript.record(
                "not_run",
                json!({"step": step, "code": ran.code, "why": why}),
            );
            run.steps.push(Step {
                think: ran.think,
                code: Some(ran.code),
                result: Value::Null,
                error: None,
                console: Vec::new(),
                calls: Vec::new(),
                llm_ms: ran.llm_ms,
                held_reply: None,
                contested_reply: None,
                dropped: ran.dropped,
                not_run: Some(why.clone()),
            });
            run.repeats = 0;
            if ran.reply.is_some() {
                run.reply = ran.reply;
                return Some(Stopped::Reply);
            }
            let mut body = json!({"result": null, "not_run": true});
            if landing == Landing::Committed {
                body["commits_so_far"] = json!(run.commits.len());
            }
            let (made, next) = match landing {
                Landing::Committed => ("The change is made.", "what was changed"),
                Landing::Aside => (
                    "The change is kept aside (a dry run): nothing is committed.",
                    "what would change",
                ),
                Landing::Proposed => (
                    "The change is proposed: a person approves it before it is made.",
                    "you proposed the change for review (not that it is done)",
                ),
            };
            add_note(
                &mut body,
                &format!(
                    "This code was not run: {why}, so running it again would make the change twice. \
                     {made} If the task asked for nothing more, next: a <reply> that says {next}."
                ),
            );
            messages.push(Message::user(render(&body)));
            return None;
        }
        let system = messages
            .first()
            .map_or("", |m| m.content.as_str())
            .to_string();
        let (evaluation, mut body) =
            self.execute(run_ctx, &ran.code, step, run, transcript, landing);
        // A result of nothing but null failed too: the fields read are not in the answer.
        let failed = evaluation.error.is_some() || only_nulls(&evaluation.result);
        if let Some(claim) = code_claim(&evaluation) {
            add_note(
                &mut body,
                &format!(
                    "Your code returned {claim:?}, but no write succeeded in it: returning words changes \
                     nothing. Only a write call whose answer has a commit changes a note."
                ),
            );
            run.code_claim = Some(claim);
        }
        if let Some(note) = example_path(&evaluation, &system, run_ctx, task) {
            add_note(&mut body, &note);
        }
        if let Some(note) = example_tag(&evaluation, &system, run_ctx, task) {
            add_note(&mut body, &note);
        }
        if let Some(note) = ambiguous_old(&evaluation, run_ctx, task) {
            add_note(&mut body, &note);
        }
        if ran.dropped.is_some() {
            add_note(
                &mut body,
                "Only your first <code> block ran; what you wrote after it was dropped. Write one \
                 <code> block per answer and wait for its observation.",
            );
        }
        run.steps.push(Step {
            think: ran.think,
            code: Some(ran.code),
            result: evaluation.result,
            error: evaluation.error,
            console: evaluation.console,
            calls: evaluation.calls,
            llm_ms: ran.llm_ms,
            held_reply: None,
            contested_reply: None,
            dropped: ran.dropped,
            not_run: None,
        });
        if ran.reply.is_some() {
            if !failed {
                run.reply = ran.reply;
                // Told with the facts if the reply is contested (see `contest`).
                run.unsent_observation = Some(render(&body));
                return Some(Stopped::Reply);
            }
            // A reply written before its code ran cannot know the code failed.
            run.held_a_reply = true;
            add_note(
                &mut body,
                "Your <reply> was not given to the user: it was written before the code ran, and the code failed \
                 (or answered nothing but null). Fix the code, or reply again once you know the outcome.",
            );
        }
        if run.repeats > 0 {
            // Small models read their own loop back and go round it until the
            // steps run out. The model sees its first try's observation again
            // instead, with what happened said (see `observe`), so its next
            // answer differs.
            transcript.record("repeat", json!({"step": step, "times": run.repeats + 1}));
            messages.pop();
            messages.pop();
        }
        messages.push(Message::user(render(&body)));
        None
    }

    /// After the same code answered nothing twice: runs the task's first
    /// call again (see [`Agent::look`]) and answers the message that shows
    /// the code and its observation.
    fn look_again(
        &self,
        talk: &mut Talk<'_>,
        run_ctx: &Context,
        task: &str,
        landing: Landing,
    ) -> String {
        let (call, _, body) = self.look(talk, run_ctx, task, landing);
        format!(
            "{NOTHING_TWICE}\n<code>{}</code>\n{}\n{AFTER_THE_LOOK}",
            call.code,
            render(&body)
        )
    }

    /// Runs the task's first call (mirai's own code, read-only, in the
    /// sandbox as any code of the run), recorded as `first_look` with the
    /// code's events: the call, what it did and its observation.
    fn look(
        &self,
        talk: &mut Talk<'_>,
        run_ctx: &Context,
        task: &str,
        landing: Landing,
    ) -> (FirstCall, Evaluation, Value) {
        let call = first_call(run_ctx, task);
        let mut look = run_ctx.clone();
        look.policy = PolicyMode::ReadOnly;
        let step = talk.run.steps.len();
        talk.transcript
            .record("first_look", json!({"step": step, "code": call.code}));
        let (evaluation, body) = self.execute(
            &look,
            &call.code,
            step,
            &mut talk.run,
            &mut talk.transcript,
            landing,
        );
        (call, evaluation, body)
    }

    /// Before the model's first answer, for a task that names a note there
    /// is, names a tag or asks a question: mirai makes the task's first look
    /// itself and answers the task's message with the look's code and
    /// observation after the task. Small models that write before they look
    /// copy the prompt's examples instead of the note (real runs fixed a
    /// "dentist" that was not there, and appended a bullet to a note of
    /// plain lines). Not in a read-only run asked for a change: there is
    /// nothing to look for, only a refusal to give.
    fn open(
        &self,
        talk: &mut Talk<'_>,
        run_ctx: &Context,
        task: &str,
        hints: &Hints,
        read_only: bool,
        landing: Landing,
    ) -> Option<String> {
        let worth = named_note(run_ctx, task).is_some() || hints.tag.is_some() || hints.question;
        if !worth || (read_only && hints.change) {
            return None;
        }
        let (call, evaluation, body) = self.look(talk, run_ctx, task, landing);
        talk.run.opening = Some(Step {
            think: None,
            code: Some(call.code.clone()),
            result: evaluation.result,
            error: evaluation.error,
            console: evaluation.console,
            calls: evaluation.calls,
            llm_ms: 0.0,
            held_reply: None,
            contested_reply: None,
            dropped: None,
            not_run: None,
        });
        let next = match (hints.question, hints.change) {
            (true, _) => AFTER_THE_LOOK.to_string(),
            (false, true) if hints.front_matter => AFTER_THE_OPENING_LOOK_FOR_A_FIELD.to_string(),
            (false, true) => AFTER_THE_OPENING_LOOK.to_string() + &exactly(hints),
            (false, false) => AFTER_A_LOOK_FOR_A_TASK.to_string(),
        };
        Some(format!(
            "{task}\n\n{OPENED}\n<code>{}</code>{}\n{}\n{next}",
            call.code,
            call.then,
            render(&body)
        ))
    }

    /// Holds the reply back once per run when it contradicts mirai's record
    /// of the run so far, or names a note that does not exist (a path from
    /// the prompt's examples, or made up): the model is told the facts (after
    /// the observation it has not seen, if the reply came with code) and has
    /// one more step. `true` when the run goes on.
    fn contest(&self, talk: &mut Talk<'_>, writes: &Writes, seen: &Seen<'_>) -> bool {
        let run = &mut talk.run;
        let unsent = run.unsent_observation.take();
        if run.facts_given {
            return false;
        }
        let Some(reply) = run.reply.clone() else {
            return false;
        };
        let record = record_of(seen.ctx, writes, run, seen.run_id, Ended::No);
        // A run with commits made a change: no claim of one contradicts it.
        let contradicted = match run.commits.is_empty() {
            true => contradiction(&reply, run.code_claim.as_deref(), &record),
            false => None,
        };
        let (why, facts) = match contradicted {
            Some(why) => {
                let facts = facts_message(&record, &why);
                (why, facts)
            }
            None => {
                let notes_now = writes.ctx.view.list().unwrap_or_default();
                let invented =
                    warnings::invented_notes(&reply, seen.task, seen.notes_before, &notes_now);
                let Some(named) = invented.first() else {
                    return false;
                };
                let why = format!("the reply {named}");
                let facts = format!("Your reply was not given to the user: it {named}. {INVENTED}");
                (why, facts)
            }
        };
        run.facts_given = true;
        run.reply = None;
        let step = run.steps.len();
        if let Some(last) = run.steps.last_mut() {
            last.contested_reply = Some(reply.clone());
        }
        talk.transcript.record(
            "reply_contested",
            json!({"step": step, "reply": reply, "why": why, "outcome": record}),
        );
        talk.messages.push(Message::user(match unsent {
            Some(observation) => format!("{observation}\n{facts}"),
            None => facts,
        }));
        true
    }

    /// The model could not be reached at the first step: the run ends with
    /// what to check, recorded in the transcript.
    fn unreachable(&self, e: &str, transcript: &mut Transcript<'_>) -> Error {
        let message = format!(
            "the model cannot be reached: {e}; check MIRAI_LLM_BASE_URL ({}), MIRAI_LLM_MODEL ({}) and the key (MIRAI_LLM_API_KEY or OPENAI_API_KEY)",
            crate::redact::urls(&self.llm.config().base_url),
            self.llm.config().model
        );
        transcript.record(
            "run_end",
            json!({"stopped": "llm_unavailable", "error": message}),
        );
        Error::new(ErrorCode::LlmUnavailable, message)
    }

    /// Runs one answer's code in the sandbox against `run_ctx`, records it in
    /// the transcript and the run's progress (its commits, whether it repeats
    /// the last step), and returns the evaluation with the observation for the model.
    fn execute(
        &self,
        run_ctx: &Context,
        code: &str,
        step: usize,
        run: &mut Progress,
        transcript: &mut Transcript<'_>,
        landing: Landing,
    ) -> (Evaluation, Value) {
        transcript.record("code_start", json!({"step": step, "code": code}));
        let evaluation = self.sandbox.run(run_ctx, code);
        for call in &evaluation.calls {
            transcript.record(
                "host_call",
                json!({"step": step, "op": call.op, "ok": call.ok, "ms": call.ms,
                       "request": call.request, "answer": call.answer}),
            );
        }
        transcript.record(
            "code_end",
            json!({"step": step, "result": evaluation.result, "error": evaluation.error,
                   "console": evaluation.console, "stats": evaluation.stats}),
        );
        run.commits.extend(evaluation.commits.iter().cloned());
        let same_as_last = run.steps.last().is_some_and(|last| {
            last.code.as_deref() == Some(code)
                && last.result == evaluation.result
                && last.error == evaluation.error
                && last.console == evaluation.console
        });
        run.repeats = if same_as_last { run.repeats + 1 } else { 0 };
        let body = observe(&evaluation, run.commits.len(), landing, run.repeats);
        (evaluation, body)
    }
}

/// Where a successful write of the run lands, as the model is told it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Landing {
    /// In a commit.
    Committed,
    /// Kept aside (a dry run).
    Aside,
    /// In the run's proposal (review mode): made only once a person approves it.
    Proposed,
}

/// What a reply is checked against before it ends the run (see `Agent::contest`).
struct Seen<'a> {
    ctx: &'a Context,
    run_id: &'a str,
    task: &'a str,
    /// The notes when the run began: a note the run deletes is no invention.
    notes_before: &'a HashSet<String>,
}

/// Where a run's writes land, and the context its code runs against.
struct Writes {
    /// Review mode: every write of the run gathers into one proposal, whose
    /// overlay the run reads through as a dry run reads through its own.
    draft: Option<Arc<Draft>>,
    /// A dry run's overlay, or the draft's.
    overlay: Option<Arc<Overlay>>,
    ctx: Context,
}

impl Writes {
    fn for_run(ctx: &Context, run_id: &str, dry_run: bool) -> Result<Writes> {
        let draft = match dry_run {
            false if proposes(ctx) => Some(begin_draft(&ctx.for_run(run_id))?),
            _ => None,
        };
        let overlay = match &draft {
            Some(draft) => Some(draft.overlay()),
            None => dry_run.then(|| Arc::new(Overlay::new())),
        };
        let run_ctx = match (&overlay, &draft) {
            (_, Some(draft)) => ctx.for_run(run_id).drafting(draft, "agent.run"),
            (Some(overlay), None) => ctx.dry_run(Arc::clone(overlay)),
            (None, None) => ctx.for_run(run_id),
        };
        Ok(Writes {
            draft,
            overlay,
            ctx: run_ctx,
        })
    }
}

/// The report of a stopped run: its draft filed as one proposal (review mode)
/// or its overlay's changes listed (a dry run), and its reply checked against
/// what it did.
fn finish(
    ctx: &Context,
    writes: Writes,
    task: &str,
    notes_before: &HashSet<String>,
    run_id: String,
    run: Progress,
    stopped: Stopped,
) -> RunReport {
    let (changes, filed) = match &writes.draft {
        Some(draft) => (None, file_draft(draft, ctx)),
        None => (
            writes.overlay.as_ref().map(|overlay| overlay.changes()),
            Ok(None),
        ),
    };
    let (proposal, unfiled) = match filed {
        Ok(proposal) => (proposal, None),
        Err(e) => (
            None,
            Some(format!("The run's writes were not proposed: {e}")),
        ),
    };
    let warnings = match &run.reply {
        Some(reply) => warnings::check(
            reply,
            &Outcome {
                task,
                wrote: !run.commits.is_empty()
                    || changes.as_ref().is_some_and(|c| !c.is_empty())
                    || proposal.is_some(),
                read_only: ctx.policy == PolicyMode::ReadOnly,
                write_calls: run
                    .steps
                    .iter()
                    .flat_map(|step| &step.calls)
                    .filter(|call| is_write(&call.op))
                    .map(|call| (call.op.as_str(), call.ok))
                    .collect(),
                notes_before,
                notes_after: &writes.ctx.view.list().unwrap_or_default(),
            },
        ),
        None => Vec::new(),
    };
    let warnings: Vec<String> = warnings.into_iter().chain(unfiled).collect();
    let record = record_of(ctx, &writes, &run, &run_id, Ended::Filed(proposal.as_ref()));
    let contradicted = run
        .reply
        .as_deref()
        .and_then(|reply| contradiction(reply, run.code_claim.as_deref(), &record));
    let warnings = warnings
        .into_iter()
        .chain(
            contradicted
                .iter()
                .map(|why| format!("{why}; the outcome above is mirai's record")),
        )
        .collect();
    RunReport {
        run_id,
        outcome: record,
        reply_contradicted: contradicted.is_some(),
        reply: run.reply,
        stopped,
        stop_detail: run.stop_detail,
        opening: run.opening,
        steps: run.steps,
        commits: run.commits,
        changes,
        proposal,
        usage: run.usage,
        warnings,
    }
}

/// The run's outcome from mirai's record: its commits and the notes git says
/// they changed, or its proposal (`filed`, when the run has ended; the draft
/// so far before), or a dry run's notes kept aside; and its failed writes.
fn record_of(
    ctx: &Context,
    writes: &Writes,
    run: &Progress,
    run_id: &str,
    ended: Ended<'_>,
) -> RunOutcome {
    let outcome = recorded(ctx, writes, run, run_id, ended);
    match ctx.policy {
        PolicyMode::ReadOnly => outcome.in_read_only(),
        _ => outcome,
    }
}

/// [`record_of`], before a read-only deployment is said.
fn recorded(
    ctx: &Context,
    writes: &Writes,
    run: &Progress,
    run_id: &str,
    ended: Ended<'_>,
) -> RunOutcome {
    let filed = match ended {
        Ended::Filed(filed) => filed,
        Ended::No => None,
    };
    let failed: Vec<outcome::FailedWrite> = run
        .steps
        .iter()
        .flat_map(|step| &step.calls)
        .filter(|call| !call.ok && is_write(&call.op))
        .map(|call| failed_write(&call.op, &call.request, &call.answer))
        .collect();
    if !run.commits.is_empty() {
        let notes = committed_notes(ctx, run_id, &run.commits);
        return RunOutcome::new(Kind::Committed, notes, run.commits.clone(), None, failed);
    }
    if let Some(proposed) = filed {
        let notes = proposed.changes.iter().map(|c| c.path.clone());
        let id = Some(proposed.proposal.clone());
        return RunOutcome::new(Kind::Proposed, notes, Vec::new(), id, failed);
    }
    let kept: Vec<String> = writes
        .overlay
        .as_ref()
        .map(|overlay| overlay.changes().into_iter().map(|c| c.path).collect())
        .unwrap_or_default();
    match (&writes.draft, kept.is_empty()) {
        (_, true) => RunOutcome::new(Kind::Nothing, kept, Vec::new(), None, failed),
        // Before the run ends its draft is not filed yet; once it has ended, `filed` says.
        (Some(draft), false) if matches!(ended, Ended::No) => {
            let id = Some(draft.id().to_string());
            RunOutcome::new(Kind::Proposed, kept, Vec::new(), id, failed)
        }
        (Some(_), false) => RunOutcome::new(Kind::Nothing, Vec::new(), Vec::new(), None, failed),
        (None, false) => RunOutcome::new(Kind::DryRun, kept, Vec::new(), None, failed),
    }
}

/// Whether a run's outcome is read after it ended, with the proposal its
/// draft made when filed (review mode), or while it goes on.
#[derive(Clone, Copy)]
enum Ended<'a> {
    No,
    Filed(Option<&'a Proposed>),
}

/// The notes `commits` changed, as git's history of run `run_id` has them
/// (a rename names both paths).
fn committed_notes(ctx: &Context, run_id: &str, commits: &[String]) -> Vec<String> {
    match crate::ops::run_commits(ctx, run_id) {
        Ok(found) => found
            .into_iter()
            .filter(|c| commits.contains(&c.commit))
            .flat_map(|c| c.paths)
            .flat_map(|p| [Some(p.path), p.from])
            .flatten()
            .collect(),
        Err(e) => {
            log::warn!("run {run_id}: its commits' notes could not be read: {e}");
            Vec::new()
        }
    }
}

/// The change a program's returned string claims when no write of the
/// program succeeded (a hard-coded "Note renamed."): a claim like a reply's.
fn code_claim(evaluation: &Evaluation) -> Option<String> {
    let wrote = evaluation
        .calls
        .iter()
        .any(|call| call.ok && is_write(&call.op));
    if wrote || evaluation.error.is_some() {
        return None;
    }
    claimed_change(evaluation.result.as_str()?)
}

/// The conversation of a run as it goes: what the model has been told, what
/// the run has done, and its transcript.
struct Talk<'t> {
    messages: Vec<Message>,
    run: Progress,
    transcript: Transcript<'t>,
}

/// An answer with code, the model's time to write it included.
struct Ran {
    think: Option<String>,
    code: String,
    reply: Option<String>,
    dropped: Option<String>,
    llm_ms: f64,
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
    /// How many answers in a row ran the previous answer's code again to the same outcome.
    repeats: usize,
    /// Whether a reply has been held back already (see [`TRY_AGAIN`]).
    held_a_reply: bool,
    /// Whether a plain reply that read as unfinished has had its reminder (see [`UNFINISHED`]).
    reminded: bool,
    /// Whether a contradicted reply has been answered with the facts (see `contest`).
    facts_given: bool,
    /// Whether mirai has made its own look after the same code answered nothing twice.
    looked_again: bool,
    /// mirai's own look before the model's first answer (see `Agent::open`): not a
    /// step of the model's, but what its first answer saw.
    opening: Option<Step>,
    /// The last change a program claimed in the string it returned with no write behind it.
    code_claim: Option<String>,
    /// The observation of the step whose reply ended the run, not yet sent.
    unsent_observation: Option<String>,
}

impl Progress {
    /// What a reply that nothing was found would deny: the model's last code
    /// when it found something, else mirai's opening look when that did, with
    /// who made it (as the model is told). An opening search counts only when
    /// its hits hold a word the task looks for: a question's generic words
    /// ("Which note mentions a pelican?") match notes that do not answer it.
    fn found(&self, hints: &Hints) -> Option<(&Step, &'static str)> {
        let last = self.steps.iter().rev().find(|step| step.code.is_some());
        let answers = |step: &&Step| {
            found_something(step)
                && (!step
                    .code
                    .as_deref()
                    .is_some_and(|code| code.contains("index.query"))
                    || hints::holds_any(&step.result.to_string(), &hints.terms))
        };
        match last.filter(|step| found_something(step)) {
            Some(step) => Some((step, "your last code")),
            None => self
                .opening
                .as_ref()
                .filter(answers)
                .map(|step| (step, "mirai's look at the notes")),
        }
    }

    /// Whether nothing has been written so far: no commit, and nothing kept
    /// aside or drafted in the run's overlay.
    fn changed_nothing(&self, overlay: &Option<Arc<Overlay>>) -> bool {
        self.commits.is_empty()
            && overlay
                .as_ref()
                .is_none_or(|overlay| overlay.changes().is_empty())
    }

    /// Whether the run is out of steps or time: why, said in `stop_detail`.
    fn out_of_budget(
        &mut self,
        max_steps: usize,
        deadline: Instant,
        deadline_ms: u64,
    ) -> Option<Stopped> {
        // A reply answered with the facts gets its one more step.
        if self.steps.len() >= max_steps + usize::from(self.facts_given) {
            self.stop_detail = Some(format!(
                "the model did not reply within {max_steps} steps (max_steps)"
            ));
            return Some(Stopped::MaxSteps);
        }
        if Instant::now() >= deadline {
            self.stop_detail = Some(deadline_passed(deadline_ms));
            return Some(Stopped::Deadline);
        }
        None
    }

    /// Records an answer with a reply and no code: `true` when the reply
    /// stands (the run ends with it). Small models answer a failed step with
    /// an apology or the error message itself: once per run (`hold`), such a
    /// reply is held back and the model asked to try again; a second stands.
    fn replied(
        &mut self,
        think: Option<String>,
        reply: Option<String>,
        dropped: Option<String>,
        llm_ms: f64,
        hold: bool,
    ) -> bool {
        self.steps.push(Step {
            think,
            code: None,
            result: Value::Null,
            error: None,
            console: Vec::new(),
            calls: Vec::new(),
            llm_ms,
            held_reply: if hold { reply.clone() } else { None },
            contested_reply: None,
            dropped,
            not_run: None,
        });
        self.repeats = 0;
        if hold {
            return false;
        }
        self.reply = reply;
        true
    }

    /// The reply the last step held back.
    fn held(&self) -> Option<&str> {
        self.steps
            .last()
            .and_then(|step| step.held_reply.as_deref())
    }

    /// Records an answer that broke the answer protocol; true when it is the
    /// second in a row, which stops the run.
    fn broke_protocol(&mut self, correction: &str, llm_ms: f64) -> bool {
        self.steps.push(Step {
            think: None,
            code: None,
            result: Value::Null,
            error: Some(Error::new(ErrorCode::ProtocolError, correction.to_string())),
            console: Vec::new(),
            calls: Vec::new(),
            llm_ms,
            held_reply: None,
            contested_reply: None,
            dropped: None,
            not_run: None,
        });
        self.broken_in_a_row += 1;
        self.repeats = 0;
        if self.broken_in_a_row >= 2 {
            self.stop_detail =
                Some("the model broke the answer protocol twice in a row".to_string());
            return true;
        }
        false
    }

    /// Why a reply may be held back, if it may: once per run, with a step
    /// left, while nothing has been written, right after a step whose code
    /// failed (not in a read-only run, where a failed write is the answer) or
    /// answered nothing but null (a reply on such a result is made up).
    fn may_hold_a_reply(
        &self,
        max_steps: usize,
        overlay: &Option<Arc<Overlay>>,
        read_only: bool,
    ) -> Option<Held> {
        let may =
            !self.held_a_reply && self.steps.len() + 1 < max_steps && self.changed_nothing(overlay);
        let last = self
            .steps
            .last()
            .filter(|last| may && last.code.is_some())?;
        if last.error.is_some() {
            return (!read_only).then_some(Held::AfterFailure);
        }
        only_nulls(&last.result).then_some(Held::AfterNulls)
    }
}

/// What the model is told after its reply named a note that does not exist.
const INVENTED: &str = "Answer only from what your code's observations showed. Next: to find the \
     note, a <code> block that searches its words with mirai.index.query and returns each hit's \
     metadata.path; if nothing is found, a <reply> that says so.";

/// What the model is told when its reply to a failed step is held back.
/// (Small models copy such text into their reply: it offers no words for one.)
const TRY_AGAIN: &str = "Your reply was not given to the user: your last code failed and nothing \
     has been changed, so the task is not done yet. Next: a <code> block that tries again, fixed as \
     the error message says; to find a note you do not know the path of, search for its words with \
     mirai.index.query.";

/// A first call for a task: mirai's own code, run by mirai before the
/// model's first answer ([`Agent::open`]) or after the same code answered
/// nothing twice, else shown to a plain answer before anything ran.
/// Chosen by the task's words ([`Hints`]): a note's backlinks, a tag's notes,
/// a long note searched (for a question) or outlined, a note read, or a
/// search for the task's words.
struct FirstCall {
    code: String,
    /// What to do after it, said after the code.
    then: &'static str,
}

impl FirstCall {
    /// The call as the model is shown it.
    fn shown(&self) -> String {
        format!("<code>{}</code>{}", self.code, self.then)
    }
}

fn first_call(ctx: &Context, task: &str) -> FirstCall {
    let hints = Hints::of(task);
    let search = |prefix: Option<&str>| {
        let prefix = prefix.map_or(String::new(), |p| format!(", path_prefix: {p:?}"));
        format!(
            "const hits = await mirai.index.query({{q: {:?}{prefix}, limit: 3}});\nreturn hits.chunks.map(c => \
             [c.metadata.path, c.content]);",
            cut(task, 120).trim_end_matches('…')
        )
    };
    let call = |code: String, then: &'static str| FirstCall { code, then };
    let named = named_note(ctx, task);
    let long = |text: &str| text.lines().count() > LONG_NOTE_LINES;
    match (named, &hints.tag) {
        (Some((path, _)), _) if hints.links => call(
            format!("return (await mirai.notes.links({{path: {path:?}}})).backlinks.map(b => b.path);"),
            "",
        ),
        (_, Some(tag)) => call(
            format!("return (await mirai.notes.list({{tag: {tag:?}}})).notes;"),
            "",
        ),
        // A long note's chunks are long too: only their lines with the words found,
        // most words first (a whole chunk's first lines can bury the one that answers).
        (Some((path, text)), _) if long(&text) && hints.question => call(
            format!(
                "const hits = await mirai.index.query({{q: {:?}, path_prefix: {path:?}, limit: 3}});\n\
                 return hits.chunks.map(c => {{\n\
                 \x20 const terms = c.explanation.matched_terms;\n\
                 \x20 const found = l => terms.filter(t => l.toLowerCase().includes(t)).length;\n\
                 \x20 const lines = c.content.split(\"\\n\").filter(l => found(l) > 0);\n\
                 \x20 return [c.metadata.path, lines.sort((a, b) => found(b) - found(a)).slice(0, 5)];\n\
                 }});",
                cut(task, 120).trim_end_matches('…')
            ),
            " (a long note: read more of it with mirai.notes.read({path, section}))",
        ),
        (Some((path, text)), _) if long(&text) => call(
            format!("return (await mirai.notes.outline({{path: {path:?}}})).headings;"),
            " (a long note: then read the one section that answers, with mirai.notes.read({path, section}))",
        ),
        (Some((path, _)), _) => call(
            format!("return (await mirai.notes.read({{path: {path:?}}})).content;"),
            "",
        ),
        (None, _) => call(search(None), ""),
    }
}

/// The first note the task names (a word ending in `.md` that is a note),
/// with its text.
fn named_note<'t>(ctx: &Context, task: &'t str) -> Option<(&'t str, String)> {
    task.split(|c: char| c.is_whitespace() || "\"'`,;()?!".contains(c))
        .map(|word| word.trim_end_matches(['.', ':']))
        .filter(|word| word.ends_with(".md"))
        .find_map(|word| {
            // Through the table, with the run's rights and view, as any read of the run.
            let read = crate::ops::dispatch(ctx, "notes.read", Input::Json(json!({"path": word})));
            Some((word, read.ok()?.get("content")?.as_str()?.to_string()))
        })
}

/// For a call that found no note at a path copied from the prompt's made-up
/// examples (`shop/list.md`): says so, and names the note the task names.
fn example_path(
    evaluation: &Evaluation,
    system: &str,
    ctx: &Context,
    task: &str,
) -> Option<String> {
    let copied = evaluation
        .calls
        .iter()
        .filter(|call| !call.ok && call.answer.contains("\"not_found\""))
        .filter_map(|call| serde_json::from_str::<Value>(&call.request).ok())
        .filter_map(|request| Some(request.get("path")?.as_str()?.to_string()))
        .find(|path| system.contains(&format!("\"{path}\"")))
        .filter(|path| !task.contains(path.as_str()))?;
    let instead = match named_note(ctx, task) {
        Some((named, _)) => format!(" The task's note is {named}."),
        None => " Find the task's note with mirai.index.query or mirai.notes.list.".to_string(),
    };
    Some(format!(
        "{copied} is a made-up path from the examples, not one of your notes.{instead}"
    ))
}

/// For a notes.edit refused because its `old` occurs more than once, when
/// the task names one of the note's headings ("... in the Friday section
/// only"): the model's own call confined to that section, to copy. Small
/// models resend the same call, or the same edit twice, until the steps run out.
fn ambiguous_old(evaluation: &Evaluation, ctx: &Context, task: &str) -> Option<String> {
    let mut request = evaluation
        .calls
        .iter()
        .filter(|call| !call.ok && call.op == "notes.edit" && call.answer.contains("` occurs "))
        .filter_map(|call| serde_json::from_str::<Value>(&call.request).ok())
        .find(|request| request.get("section").is_none())?;
    let path = request.get("path")?.as_str()?.to_string();
    let outline =
        crate::ops::dispatch(ctx, "notes.outline", Input::Json(json!({"path": path}))).ok()?;
    let words = |text: &str| -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    // The note's own path ("plans.md") names no heading ("# Plans").
    let task_words = words(&task.replace(&path, " "));
    let named: Vec<String> = outline
        .get("headings")?
        .as_array()?
        .iter()
        .filter_map(|heading| heading.get("text")?.as_str())
        .filter(|text| {
            let heading = words(text);
            !heading.is_empty()
                && task_words
                    .windows(heading.len())
                    .any(|w| w == heading.as_slice())
        })
        .map(str::to_string)
        .collect();
    // Only one heading named: the one section the task means.
    let [section] = named.as_slice() else {
        return None;
    };
    request["section"] = Value::from(section.as_str());
    // The same edit sent twice (once per place) is one edit within the section.
    if let Some(edits) = request.get_mut("edits").and_then(Value::as_array_mut) {
        edits.dedup();
    }
    Some(format!(
        "The task names the section {section:?}: edit within it alone. Your call, confined to it: \
         mirai.notes.edit({request})"
    ))
}

/// For a call whose `tag` was copied from the prompt's examples when the
/// task names no such tag (a question searched as `{tag: "recipe"}`): says
/// so, with a search for the task's words to copy.
fn example_tag(evaluation: &Evaluation, system: &str, ctx: &Context, task: &str) -> Option<String> {
    let tag = evaluation
        .calls
        .iter()
        .filter_map(|call| serde_json::from_str::<Value>(&call.request).ok())
        .filter_map(|request| Some(request.get("tag")?.as_str()?.to_string()))
        .find(|tag| system.contains(&format!("tag: \"{tag}\"")))
        .filter(|tag| !task.to_lowercase().contains(&tag.to_lowercase()))?;
    Some(format!(
        "{tag:?} is a tag from the examples; the task names no such tag. To find notes by their \
         words, search: <code>{}</code>",
        first_call(ctx, task).code
    ))
}

/// Lines past which a note is read by its outline first.
const LONG_NOTE_LINES: usize = 150;

/// Why a reply was held back (see [`Progress::may_hold_a_reply`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    AfterFailure,
    AfterNulls,
    /// The reply only repeated what mirai had just told the model.
    Parroted,
    /// The reply said nothing was found right after code that found something.
    DeniesItsResult,
    /// A read-only run's reply to a request for a change did not say it is read-only.
    ReadOnlyUnsaid,
    /// A reply to a request for a change, with nothing changed, that did not say why.
    ChangeNotMade,
}

/// Whether a reply says the deployment is read-only.
fn says_read_only(reply: &str) -> bool {
    let lower = reply.to_lowercase();
    lower.contains("read-only") || lower.contains("read only")
}

/// Whether a reply says a change was not or cannot be made ("I cannot ...",
/// "there is no such note", "nothing was changed").
fn says_why_not(reply: &str) -> bool {
    const WHY_NOT: [&str; 14] = [
        "cannot",
        "can't",
        "can not",
        "could not",
        "couldn't",
        "unable",
        "not possible",
        "impossible",
        "does not exist",
        "doesn't exist",
        "no such",
        "not found",
        "nothing was changed",
        "not changed",
    ];
    let lower = reply.to_lowercase();
    WHY_NOT.iter().any(|phrase| lower.contains(phrase)) || protocol::says_none_found(reply)
}

/// What the model is told when its reply to a request for a change came with
/// nothing changed and no word of why.
const CHANGE_NOT_MADE: &str =
    "Your reply was not given to the user: the task asks for a change to \
     the notes, and nothing has been changed yet. Next: a <code> block that makes the change (any \
     text it replaces copied exactly from the observation); if it cannot be made, a <reply> that \
     says why and that nothing was changed.";

/// What a read-only run's model is told when its reply to a request for a
/// change did not say why nothing changed.
const READ_ONLY_UNSAID: &str = "Your reply was not given to the user: the task asks for a change, \
     and this deployment is read-only, so no change can be made here, whatever the notes hold. \
     Next: a <reply> that says so, e.g. <reply>This deployment is read-only, so nothing was \
     changed.</reply>";

/// Whether a step's code ran without an error and answered data: a list
/// with an entry that is not null, or an object. (Text may be the model's
/// own words: "No note found".)
fn found_something(step: &Step) -> bool {
    let data = match &step.result {
        Value::Array(items) => items.iter().any(|item| !item.is_null()),
        Value::Object(_) => true,
        _ => false,
    };
    data && step.code.is_some()
        && step.not_run.is_none()
        && step.error.is_none()
        && !step.calls.iter().any(|call| is_write(&call.op))
}

/// Most characters of a result the model is shown when its reply denied it.
const DENIED_SHOWN: usize = 400;

/// What the model is told when its reply said nothing was found right after
/// code that found something (see [`Progress::found`]): what that code answered.
fn denied_message(run: &Progress, hints: &Hints) -> String {
    let (who, result) = run
        .found(hints)
        .map_or(("your last code", String::new()), |(step, who)| {
            (who, cut(&step.result.to_string(), DENIED_SHOWN))
        });
    format!(
        "Your reply was not given to the user: it says nothing was found, but {who} \
         answered {result}. Next: a <reply> that answers the task from that answer, naming each \
         note's path it gives."
    )
}

/// Whether `reply` only repeats mirai's last message to the model (small
/// models copy a note into their reply): 30 characters or more of it, word
/// for word, that the model had not written before and mirai had not offered
/// as an example reply.
fn parrots(reply: &str, messages: &[Message]) -> bool {
    let reply = reply.trim().trim_end_matches('.');
    let told = messages
        .iter()
        .rev()
        .find(|message| message.role == "user")
        .map_or("", |message| message.content.as_str());
    // mirai quotes a contested reply back: the model's own words are no copy.
    let its_own = messages
        .iter()
        .filter(|message| message.role == "assistant")
        .rev()
        .skip(1)
        .any(|message| message.content.contains(reply));
    // Nor is a reply mirai offered as an example ("e.g. <reply>I proposed ...").
    let offered = told.contains(&format!("<reply>{reply}"));
    reply.len() >= 30 && told.contains(reply) && !its_own && !offered
}

/// What the model is told when its reply repeated mirai's note: the task again.
fn parroted_message(task: &str, read_only: bool) -> String {
    let read_only = match read_only {
        true => " This deployment is read-only: if the task needs a change, reply that nothing can be changed here.",
        false => "",
    };
    format!(
        "Your reply was not given to the user: it repeated mirai's note instead of answering the task. \
         The task: {task:?}.{read_only} Next: a <code> block that works on it, or a <reply> in your own \
         words that answers it."
    )
}

/// What the model is told when its reply to a result of nothing but null is
/// held back.
const ONLY_NULLS: &str = "Your reply was not given to the user: your last result was a list of \
     nothing but null, so it says nothing about the notes. Next: a <code> block that returns the \
     answer's entries themselves (the observation's note names their shape), then reply from what \
     it returns.";

/// What the model is told when its reply in plain words came before any code
/// ran, or reads as a thought it has not finished (once per run).
const UNFINISHED: &str = "Your answer had no <code> block and no <reply>, so it was not given to the \
     user. If the task needs the notes, look at them first: a <code> block (search with \
     mirai.index.query, or read the note). If your answer is final, send it as <reply>your answer</reply>.";

/// What the model is told when the same code answered nothing twice, before
/// the code mirai ran and its observation.
const NOTHING_TWICE: &str = "You sent the same code twice and it answered nothing both times \
     (null, undefined or an empty list): sending it again will answer nothing again. mirai ran a \
     first step for this task:";

/// Whether a step's code ran without an error, wrote nothing and answered
/// nothing: null (or undefined), an empty list or text, or a list of nulls.
fn answered_nothing(step: &Step) -> bool {
    let empty = match &step.result {
        Value::Null => true,
        Value::Array(items) => items.iter().all(Value::is_null),
        Value::String(text) => text.trim().is_empty(),
        _ => false,
    };
    empty
        && step.code.is_some()
        && step.not_run.is_none()
        && step.error.is_none()
        && !step.calls.iter().any(|call| is_write(&call.op))
}

/// What the model is told after the observation of the code mirai ran.
const AFTER_THE_LOOK: &str =
    "Next: answer the task from this observation in a <reply>, naming each \
     note's path and quoting only text it shows; or a <code> block to look further.";

/// What follows the task when mirai looked first (see `Agent::open`).
const OPENED: &str = "mirai looked at the notes for this task first (its own code, already run; \
     nothing was changed):";

/// What a task asking for a change is told after mirai's opening look.
const AFTER_THE_OPENING_LOOK: &str = "Next: a <code> block that makes the change the task asks \
     for (to add lines, notes.append or notes.insert; to change text, notes.edit with `old` \
     copied exactly from this observation).";

/// What a task asking for a change to front matter is told after mirai's
/// opening look (real runs rewrote the whole block with notes.edit).
const AFTER_THE_OPENING_LOOK_FOR_A_FIELD: &str = "Next: a <code> block that sets or removes the \
     field with mirai.notes.front_matter({path, set: {field: value}}) or ({path, remove: [field]}), \
     never notes.edit or notes.write.";

/// For a change task that quotes text (not a heading's new name, whose marks
/// the quote leaves out): that the quoted text is written as quoted. Small
/// models add a bullet ("- Saw a kingfisher.") to a line quoted without one.
fn exactly(hints: &Hints) -> String {
    let quoted: Vec<String> = hints
        .quoted
        .iter()
        .filter(|text| !text.ends_with(".md"))
        .map(|text| format!("{text:?}"))
        .collect();
    if quoted.is_empty() || hints.heading {
        return String::new();
    }
    let them = if quoted.len() == 1 { "it" } else { "them" };
    format!(
        " Use {} exactly as the task quotes {them}, with no mark such as \"- \" added.",
        quoted.join(" and ")
    )
}

/// What a task that is neither a question nor a change by its words is told
/// after mirai's opening look.
const AFTER_A_LOOK_FOR_A_TASK: &str = "Next: a <code> block that does what the task asks (any \
     text it replaces copied exactly from this observation), or a <reply> if it asks only for an \
     answer.";

/// Why the transcript's `dropped` event dropped text.
const DROPPED: &str = "only an answer's first <code> block runs: what follows it (more code, an \
     observation or a turn the model wrote itself, a reply after code that had not run) is dropped";

/// The sampling temperature after the model sent the same code to the same
/// outcome: at 0 it would most likely send that code again.
const REPEAT_TEMPERATURE: f64 = 0.7;

fn deadline_passed(deadline_ms: u64) -> String {
    format!("the run passed its {deadline_ms} ms deadline (MIRAI_AGENT_DEADLINE_MS)")
}

fn round(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

/// What the model is told after its code ran: the outcome as JSON, each part
/// capped at [`OBSERVATION_CAP`] bytes with the cut stated, how many commits
/// the run has made so far, and a `note` in plain words where small models go
/// wrong: a write that failed, a program that returned nothing or threw after
/// its calls succeeded (what the calls answered), a malformed request (the
/// call's shape), code sent again to the same outcome (`repeats` times in a
/// row before this). [`render`] makes it the message.
fn observe(
    evaluation: &Evaluation,
    commits_so_far: usize,
    landing: Landing,
    repeats: usize,
) -> Value {
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
    let mut body = json!({"result": result, "error": error, "console": console, "calls": calls});
    // Small models take "I read it" for "I changed it"; the count says what happened.
    if landing == Landing::Committed {
        body["commits_so_far"] = json!(commits_so_far);
    }
    if repeats > 0 {
        add_note(&mut body, &repeated(repeats + 1, evaluation));
    } else if let Some(note) = failed_writes(evaluation) {
        add_note(&mut body, &note);
    }
    if let Some(note) = unchanged_writes(evaluation, landing) {
        add_note(&mut body, &note);
    } else if let Some(note) = committed_writes(evaluation, landing) {
        add_note(&mut body, &note);
    }
    if let Some(note) = proposed_writes(evaluation, landing) {
        add_note(&mut body, note);
    }
    if let Some(note) = malformed(evaluation) {
        add_note(&mut body, &note);
    }
    if let Some(note) = lost_answers(evaluation) {
        add_note(&mut body, &note);
    }
    if let Some(note) = looks_wrong(evaluation) {
        add_note(&mut body, &note);
    }
    if let Some(note) = evaluation
        .error
        .as_ref()
        .and_then(|e| suggest::js_mistake(&e.message))
    {
        add_note(&mut body, &note);
    }
    body
}

/// For a result that looks wrong although the calls answered data: a list of
/// nothing but null (fields read that the answer does not have), or an
/// object answer iterated as if it were a list. Names the answers' real shape.
fn looks_wrong(evaluation: &Evaluation) -> Option<String> {
    let all_null = only_nulls(&evaluation.result);
    let iterated = evaluation
        .error
        .as_ref()
        .is_some_and(|e| e.message.contains("not iterable"));
    if !all_null && !iterated {
        return None;
    }
    let shapes: Vec<String> = answered(evaluation)
        .into_iter()
        .map(|(op, outline)| {
            let strings = outline.contains(": string[");
            format!(
                "mirai.{op} answers {outline}{}",
                if strings {
                    " (a list of plain strings: each entry is the value itself, e.g. the path, not an object with fields)"
                } else {
                    ""
                }
            )
        })
        .collect();
    if shapes.is_empty() {
        return None;
    }
    let what = if all_null {
        "Your result is a list of nothing but null: the fields your code read are not in the answer, so this result says nothing about the notes."
    } else {
        "Your code iterated an answer that is an object, not a list: iterate its list field (e.g. `for (const path of answer.notes)`)."
    };
    // The data itself: a small model answers from it where it misreads a shape.
    let data = evaluation
        .calls
        .iter()
        .rev()
        .filter(|call| call.ok && !is_write(&call.op))
        .map(|call| {
            // A long answer was cut for the record: shown as it was kept.
            let answer = serde_json::from_str::<Value>(&call.answer)
                .ok()
                .and_then(|answer| answer.get("ok").map(Value::to_string))
                .unwrap_or_else(|| call.answer.clone());
            format!(
                " What mirai.{} answered: {}",
                call.op,
                cut(&answer, ANSWER_SHOWN)
            )
        })
        .next()
        .unwrap_or_default();
    Some(format!("{what} {}.{data}", shapes.join("; ")))
}

/// How much of a call's answer the note on a result that looks wrong shows.
const ANSWER_SHOWN: usize = 600;

/// Whether `result` is a list of nothing but null (or undefined, which
/// reaches the host as null): fields read that the answers do not have.
fn only_nulls(result: &Value) -> bool {
    result
        .as_array()
        .is_some_and(|items| !items.is_empty() && items.iter().all(Value::is_null))
}

/// Each successful call's row and answer outline, once each, at most three.
fn answered(evaluation: &Evaluation) -> Vec<(&str, &str)> {
    let mut found: Vec<(&str, &str)> = Vec::new();
    for call in &evaluation.calls {
        if let Some(outline) = &call.answered {
            if !found.contains(&(call.op.as_str(), outline.as_str())) {
                found.push((call.op.as_str(), outline.as_str()));
            }
        }
    }
    found.truncate(3);
    found
}

/// The observation message for `body`: its data as JSON, and its `note` after
/// it in plain text. (Inside JSON a note's code would reach the model with
/// doubled escapes, `\\n` for `\n`, and small models copy those into notes.)
fn render(body: &Value) -> String {
    let mut data = body.clone();
    let note = data
        .as_object_mut()
        .and_then(|fields| fields.remove("note"));
    match note.as_ref().and_then(Value::as_str) {
        Some(note) => format!("<observation>\n{data}\nnote: {note}\n</observation>"),
        None => format!("<observation>\n{data}\n</observation>"),
    }
}

/// Adds `note` to the observation's notes.
fn add_note(body: &mut Value, note: &str) {
    let text = match body.get("note").and_then(Value::as_str) {
        Some(before) => format!("{before} {note}"),
        None => note.to_string(),
    };
    body["note"] = Value::String(text);
}

/// The note for writes that failed: what to do next, in words that make a
/// poor reply (small models copy this text into their reply).
fn failed_writes(evaluation: &Evaluation) -> Option<String> {
    let failed: Vec<&str> = evaluation
        .calls
        .iter()
        .filter(|call| !call.ok && is_write(&call.op))
        .map(|call| call.op.as_str())
        .collect();
    if failed.is_empty() {
        return None;
    }
    let calls = format!(
        "{} call{}",
        failed.join(", "),
        if failed.len() == 1 { "" } else { "s" }
    );
    let denied = evaluation
        .error
        .as_ref()
        .is_some_and(|e| e.code == ErrorCode::PolicyDenied);
    Some(if denied {
        format!(
            "The {calls} changed nothing: this deployment is read-only and no write can succeed. \
             Next: a <reply> that says so, e.g. <reply>This deployment is read-only, so nothing was \
             changed.</reply>"
        )
    } else {
        // The model's own call, mended where mirai can (a malformed one's is in `malformed`'s note).
        let own = evaluation
            .calls
            .iter()
            .filter(|call| !call.ok && !call.answer.contains("malformed request for "))
            .find_map(suggest::mended)
            .unwrap_or_default();
        format!(
            "The {calls} changed nothing. Next: a <code> block that calls it again, fixed as the \
             error message says (it often names the right path or the exact text).{own}"
        )
    })
}

/// Why `code` must not run again: it is the code of an earlier step whose
/// writes all succeeded ("it is step 2's code, whose notes.append of
/// todo.md already succeeded"). Code whose write failed, or that only read,
/// may be sent again.
fn done_before(steps: &[Step], code: &str) -> Option<String> {
    let (at, step) = steps.iter().enumerate().find(|(_, step)| {
        step.code.as_deref() == Some(code)
            && step.not_run.is_none()
            && step.calls.iter().any(|call| is_write(&call.op))
            && step
                .calls
                .iter()
                .filter(|call| is_write(&call.op))
                .all(|call| call.ok)
    })?;
    let writes: Vec<String> = step
        .calls
        .iter()
        .filter(|call| is_write(&call.op))
        .map(|call| match written_path(call) {
            Some(path) => format!("{} of {path}", call.op),
            None => call.op.clone(),
        })
        .collect();
    Some(format!(
        "it is step {}'s code, whose {} already succeeded",
        at + 1,
        writes.join(" and ")
    ))
}

/// The note a write call named (`path`, or a move's `from`).
fn written_path(call: &CallRecord) -> Option<String> {
    let request: Value = serde_json::from_str(&call.request).ok()?;
    ["path", "from"]
        .iter()
        .find_map(|field| request.get(field).and_then(Value::as_str))
        .map(str::to_string)
}

/// For writes that committed: the change is made, so the next answer is a
/// reply, not the same call again (small models append a line twice).
fn committed_writes(evaluation: &Evaluation, landing: Landing) -> Option<String> {
    if landing != Landing::Committed || evaluation.commits.is_empty() {
        return None;
    }
    let mut paths: Vec<String> = evaluation
        .calls
        .iter()
        .filter(|call| call.ok && is_write(&call.op))
        .filter_map(written_path)
        .collect();
    paths.dedup();
    let commits: Vec<&str> = evaluation
        .commits
        .iter()
        .map(|c| c.get(..7).unwrap_or(c))
        .collect();
    let what = match paths.is_empty() {
        true => String::new(),
        false => format!(" to {}", paths.join(", ")),
    };
    Some(format!(
        "Done: the change{what} is committed ({}). Do not send this code again: it would make \
         the change twice. If the task asked for nothing more, next: a <reply> that says what was changed.",
        commits.join(", ")
    ))
}

/// For writes that succeeded without a commit: the note already held that
/// text, so whatever the task asked to change was not changed (a model that
/// replaced a word the note does not have).
fn unchanged_writes(evaluation: &Evaluation, landing: Landing) -> Option<String> {
    // Writes kept aside or proposed never commit.
    if landing != Landing::Committed {
        return None;
    }
    let written = evaluation
        .calls
        .iter()
        .filter(|call| call.ok && is_write(&call.op))
        .count();
    if written <= evaluation.commits.len() {
        return None;
    }
    // The text the note holds, when the write sent it whole: what the change must be made in.
    let held = evaluation
        .calls
        .iter()
        .filter(|call| call.ok && call.op == "notes.write")
        .filter_map(|call| serde_json::from_str::<Value>(&call.request).ok())
        .find_map(|request| {
            let path = request.get("path")?.as_str()?.to_string();
            let content = request.get("content")?.as_str()?.to_string();
            Some((path, content))
        });
    let shown = match held {
        Some((path, content)) => format!(
            " {path} holds: {:?}: find the words to change in it.",
            cut(&content, UNCHANGED_SHOWN)
        ),
        None => String::new(),
    };
    Some(format!(
        "A write succeeded but changed nothing (its commit is null): the note already held exactly \
         that text, so your code changed nothing in it (a replace whose old text is not in the note).{shown} \
         Next: a <code> block that makes the change the task asks for."
    ))
}

/// How much of a note an unchanged write's note shows the model.
const UNCHANGED_SHOWN: usize = 800;

/// For writes that succeeded in review mode: they are proposed, not made
/// (small models call a proposal done; they copy this text into their reply).
fn proposed_writes(evaluation: &Evaluation, landing: Landing) -> Option<&'static str> {
    let proposed = landing == Landing::Proposed
        && evaluation
            .calls
            .iter()
            .any(|call| call.ok && is_write(&call.op));
    proposed.then_some(
        "This change is proposed, not made: the note is unchanged until a person approves the \
         proposal. Your reply must say you proposed the change for review, not that it is done.",
    )
}

/// For a request the operation could not read (a field missing or of the
/// wrong type): the call's shape, as the prompt gives it.
fn malformed(evaluation: &Evaluation) -> Option<String> {
    let message = &evaluation.error.as_ref()?.message;
    let (_, rest) = message.split_once("malformed request for ")?;
    let name = rest.split(':').next()?;
    let entry = crate::ops::find(name)?;
    let schema = (entry.request_schema)().to_value();
    // A field of the request put inside a list's entries (`edits: [{old, new}, {section}]`).
    let misplaced = message
        .split_once("unknown field `")
        .and_then(|(_, rest)| {
            let (field, rest) = rest.split_once('`')?;
            let list = rest.strip_prefix(" in `")?.split('[').next()?;
            schema["properties"].get(field).map(|_| (field, list))
        })
        .map_or(String::new(), |(field, list)| {
            format!(" `{field}` is a field of the request itself, beside `path`, not of each entry of `{list}`.")
        });
    // Not its example: small models copy an example's path and text verbatim.
    // The model's own call, mended where mirai can, instead.
    let own = evaluation
        .calls
        .iter()
        .rev()
        .find(|call| !call.ok && call.op == name)
        .and_then(suggest::mended)
        .unwrap_or_default();
    Some(format!(
        "mirai.{name} takes {}.{misplaced}{own}",
        prompt::shape(&schema)
    ))
}

/// For a program that returned nothing, or threw, after calls that
/// succeeded: what those calls answered, so the model reads the right fields
/// (`(await mirai.notes.list()).notes`, not `.length` of the answer itself).
fn lost_answers(evaluation: &Evaluation) -> Option<String> {
    let threw = evaluation
        .error
        .as_ref()
        .is_some_and(|e| e.code == ErrorCode::SandboxError);
    if !(threw || (evaluation.error.is_none() && evaluation.result.is_null())) {
        return None;
    }
    // An object iterated as a list is told by `looks_wrong`.
    if evaluation
        .error
        .as_ref()
        .is_some_and(|e| e.message.contains("not iterable"))
    {
        return None;
    }
    let mut answered: Vec<String> = Vec::new();
    for call in &evaluation.calls {
        let Some(outline) = &call.answered else {
            continue;
        };
        let line = format!("mirai.{} answered {outline}", call.op);
        if !answered.contains(&line) {
            answered.push(line);
        }
    }
    if answered.is_empty() {
        return None;
    }
    answered.truncate(3);
    let what = if threw {
        "Your code threw after its calls succeeded."
    } else {
        "Your code returned nothing (null or undefined)."
    };
    Some(format!(
        "{what} {}. Next: a <code> block that uses these field names and returns the part that \
         answers the task.",
        answered.join("; ")
    ))
}

/// `example` with the value of its first `path: "..."` replaced by `path`.
fn with_path(example: &str, path: &str) -> String {
    const FIELD: &str = "path: \"";
    let Some(start) = example.find(FIELD).map(|at| at + FIELD.len()) else {
        return example.to_string();
    };
    let Some(len) = example[start..].find('"') else {
        return example.to_string();
    };
    format!(
        "{}{}{}",
        &example[..start],
        path.replace('"', "\\\""),
        &example[start + len..]
    )
}

/// The note for an outcome the model has now had `times` times in a row, for
/// the same code.
fn repeated(times: usize, evaluation: &Evaluation) -> String {
    if evaluation.error.is_some() {
        // The row that failed (or the last one called): its own example from the table.
        let call = evaluation
            .calls
            .iter()
            .rev()
            .find(|call| !call.ok)
            .or(evaluation.calls.last());
        let example = call
            .and_then(|call| Some((call, crate::ops::find(&call.op)?)))
            .map_or(String::new(), |(call, entry)| {
                if entry.class == Class::Write {
                    // Never a write's example: small models write its text into the note.
                    // A malformed call's own, mended, is in `malformed`'s note already.
                    if evaluation
                        .error
                        .as_ref()
                        .is_some_and(|e| e.message.contains("malformed request for "))
                    {
                        return String::new();
                    }
                    return suggest::mended(call).unwrap_or_default();
                }
                let request = serde_json::from_str::<Value>(&call.request).ok();
                // With the path the model used: small models copy an example's path verbatim.
                let example = match request
                    .and_then(|request| Some(request.get("path")?.as_str()?.to_string()))
                {
                    Some(path) => with_path(entry.example, &path),
                    None => entry.example.to_string(),
                };
                format!(
                    " A call of mirai.{} that works, from the API's own examples (put in your \
                     note's text): {example}",
                    entry.name
                )
            });
        format!(
            "You sent this same code {times} times and it failed the same way each time. Next: a \
             <code> block with different code, fixed as the error message says.{example}"
        )
    } else if evaluation.result.is_null() {
        format!("You ran this same code {times} times and it returned nothing each time.")
    } else if only_nulls(&evaluation.result) {
        format!(
            "You ran this same code {times} times and it returned nothing but null each time. Next: \
             different code, reading the fields the answer has."
        )
    } else {
        format!(
            "You ran this same code {times} times and got this same result each time: running it \
             again tells you nothing new. Next: if this result answers the task, a <reply> that \
             answers it from this result; if not, different code."
        )
    }
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

/// A run's listener that also tells the change stream (`run` events) of the
/// run's start, each step's end and the run's end.
fn telling_the_stream<'a>(
    events: Arc<Events>,
    run_id: String,
    starter: Option<String>,
    listener: &'a mut dyn FnMut(&Event),
) -> impl FnMut(&Event) + 'a {
    let mut steps_done = 0;
    move |event: &Event| {
        let status = match event.kind {
            "run_start" => Some("started"),
            "code_end" | "reply_held" => {
                steps_done += 1;
                Some("step")
            }
            "run_end" => Some("ended"),
            _ => None,
        };
        if let Some(status) = status {
            let mut data = json!({"run_id": run_id, "status": status, "step": steps_done});
            if let Some(stopped) = event.data.get("stopped") {
                data["stopped"] = stopped.clone();
            }
            events.publish_started_by("run", data, starter.clone());
        }
        listener(event);
    }
}
