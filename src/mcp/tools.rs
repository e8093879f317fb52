//! MCP tools: one per row of the operation table (`notes.read` is
//! `notes_read`), generated from it, plus `agent_eval`, code mode in the
//! sandbox (it is not a row, so the sandbox cannot call itself:
//! ARCHITECTURE.md, "The sandbox's only way out is the table").

use serde_json::{json, Value};

use super::rpc::{code, RpcError};
use crate::agent::prompt::api_reference;
use crate::error::Error;
use crate::ops::adapters::{Synced, Ticket};
use crate::ops::guard::ALLOW_LARGE_DELETE;
use crate::ops::{self, Class, Context, Input, OpEntry, TABLE};
use crate::sandbox::{EvalRequest, Sandbox};

/// The code-mode tool's name.
pub const AGENT_EVAL: &str = "agent_eval";

/// A row's tool name: dots become underscores.
pub fn tool_name(op: &OpEntry) -> String {
    op.name.replace('.', "_")
}

/// Every tool a client may call; write tools (and the reviewer's, which no
/// model may call anyway) are left out in `read_only` mode.
pub fn list(read_only: bool, sandbox: &Sandbox) -> Value {
    let limits = sandbox.limits();
    let mut tools: Vec<Value> = TABLE
        .iter()
        .filter(|op| !(read_only && matches!(op.class, Class::Write | Class::Review)))
        .map(|op| {
            let read = op.class == Class::Read;
            // A sync adds others' commits and pushes mirai's, never loses either,
            // and talks to the remote.
            let sync = op.class == Class::Sync;
            let input = object_schema((op.request_schema)().to_value());
            // The rows a guard may refuse say how to pass it.
            let guarded = if input["properties"].get("allow_large_delete").is_some() {
                format!("\n{ALLOW_LARGE_DELETE}")
            } else {
                String::new()
            };
            json!({
                "name": tool_name(op),
                "title": op.name,
                "description": format!("{}{guarded}\nExample (as JavaScript in agent_eval): {}", op.summary, op.example),
                "inputSchema": input,
                "outputSchema": object_schema((op.response_schema)().to_value()),
                "annotations": {
                    "readOnlyHint": read,
                    "destructiveHint": matches!(op.class, Class::Write | Class::Review),
                    "idempotentHint": read || sync,
                    "openWorldHint": sync,
                },
            })
        })
        .collect();
    tools.push(json!({
        "name": AGENT_EVAL,
        "title": "Run JavaScript in mirai's sandbox",
        "description": format!(
            "Run a JavaScript program in mirai's sandbox (QuickJS in WebAssembly) to do many operations in one call. \
             The program runs as the body of an async function: `await` the functions below and `return` a JSON value. \
             console.log is captured. A failed call throws an Error with `.code`. With dry_run, writes stay in memory \
             and the answer lists the diff per note. Limits per call: {} MiB of memory, {} ms, {} calls, \
             {} bytes of console output and result.\n{}",
            limits.memory_bytes / (1024 * 1024),
            limits.timeout_ms,
            limits.max_calls,
            limits.max_output_bytes,
            api_reference(read_only)
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "JavaScript; may use await and return."},
                "dry_run": {"type": "boolean", "description": "Keep writes in memory and answer the diffs.", "default": false},
            },
            "required": ["code"],
        },
        "annotations": {
            "readOnlyHint": read_only,
            "destructiveHint": !read_only,
            "idempotentHint": false,
            "openWorldHint": false,
        },
    }));
    json!({ "tools": tools })
}

/// The place in the next sync of a `tools/call` naming a row of class sync
/// (`repo_sync`), taken as `ops::dispatch_sync` takes it, for a transport that
/// awaits the sync without holding a thread and hands its answer to [`call`];
/// `None` for any other message.
pub fn sync_ticket(ctx: &Context, params: &Value) -> Option<Result<Ticket, Error>> {
    let name = params.get("name").and_then(Value::as_str)?;
    let op = TABLE
        .iter()
        .find(|op| op.class == Class::Sync && tool_name(op) == name)?;
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(arguments @ Value::Object(_)) => arguments.clone(),
        Some(_) => return None, // refused by `call`, as any malformed call
    };
    Some(ops::dispatch_sync(ctx, op.name, Input::Json(arguments)))
}

/// The row a `tools/call` names (`None`: no such tool, or `agent_eval`).
pub fn row_of(params: &Value) -> Option<&'static str> {
    let name = params.get("name").and_then(Value::as_str)?;
    TABLE
        .iter()
        .find(|op| tool_name(op) == name)
        .map(|op| op.name)
}

/// Calls a tool: the row through `ops::dispatch` (same policy, validation and
/// errors as HTTP), or the sandbox for `agent_eval`. `synced` is the answer of
/// the sync a transport already awaited for this call ([`sync_ticket`]); a
/// sync row without one waits here.
pub fn call(
    ctx: &Context,
    sandbox: &Sandbox,
    max_result_bytes: usize,
    params: &Value,
    synced: Option<Result<Synced, Error>>,
) -> Result<Value, RpcError> {
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::new(code::INVALID_PARAMS, "tools/call needs a tool name"))?;
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(arguments @ Value::Object(_)) => arguments.clone(),
        Some(_) => {
            return Err(RpcError::new(
                code::INVALID_PARAMS,
                "tools/call arguments must be an object",
            ))
        }
    };
    if name == AGENT_EVAL {
        return Ok(eval(ctx, sandbox, max_result_bytes, arguments));
    }
    let op = TABLE
        .iter()
        .find(|op| tool_name(op) == name)
        .ok_or_else(|| RpcError::new(code::INVALID_PARAMS, format!("unknown tool: {name}")))?;
    let outcome = match synced {
        Some(synced) if op.class == Class::Sync => synced.and_then(|synced| {
            serde_json::to_value(synced)
                .map_err(|e| Error::internal(format!("cannot render the sync's answer: {e}")))
        }),
        _ => ops::dispatch(ctx, op.name, Input::Json(arguments)),
    };
    Ok(match outcome {
        Ok(value) => success(max_result_bytes, value, true),
        Err(err) => failure(&err),
    })
}

fn eval(ctx: &Context, sandbox: &Sandbox, max_result_bytes: usize, arguments: Value) -> Value {
    let request: EvalRequest = match serde_json::from_value(arguments) {
        Ok(request) => request,
        Err(e) => {
            return failure(&Error::new(
                crate::error::ErrorCode::InvalidRequest,
                format!("agent_eval takes {{\"code\": \"<JavaScript>\", \"dry_run\"?: bool}}: {e}"),
            ))
        }
    };
    match sandbox.eval(ctx, &request) {
        Ok(evaluation) => {
            let failed = evaluation.error.is_some();
            let value = serde_json::to_value(&evaluation).unwrap_or(Value::Null);
            let mut result = success(max_result_bytes, value, false);
            result["isError"] = json!(failed);
            result
        }
        Err(err) => failure(&err),
    }
}

/// A successful result: the answer as JSON text (cut to the cap, with the cap
/// stated, as a valid JSON object) and, when whole, as `structuredContent`.
fn success(max_result_bytes: usize, value: Value, structured: bool) -> Value {
    let text = value.to_string();
    if text.len() > max_result_bytes {
        let notice = json!({
            "truncated": true,
            "bytes": text.len(),
            "max_result_bytes": max_result_bytes,
            "note": "the answer is larger than MIRAI_MCP_MAX_RESULT_BYTES; ask for less (a smaller limit, fewer paths) or use agent_eval to return only what you need",
            "preview": preview(&text, max_result_bytes / 2),
        });
        return json!({"content": [{"type": "text", "text": notice.to_string()}], "isError": false});
    }
    let mut result = json!({"content": [{"type": "text", "text": text}], "isError": false});
    if structured {
        result["structuredContent"] = value;
    }
    result
}

/// An operation's failure: a tool result the model can read and act on.
fn failure(err: &Error) -> Value {
    json!({
        "content": [{"type": "text", "text": format!("{}: {}", err.code, err.message)}],
        "isError": true,
    })
}

/// Tool schemas must be objects at the root (a field-less request has no `type`).
fn object_schema(mut schema: Value) -> Value {
    if let Some(object) = schema.as_object_mut() {
        object.remove("$schema");
        object.entry("type").or_insert(json!("object"));
    }
    schema
}

fn preview(text: &str, max: usize) -> String {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}
