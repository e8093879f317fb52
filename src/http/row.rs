//! The one handler for every row of the operation table: takes the request
//! from where the row's [`HttpRoute`](crate::ops::HttpRoute) says (nothing, the
//! query string or the JSON body), runs it through [`ops::dispatch`] on the
//! blocking pool, and renders the answer.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Map, Value};

use super::respond::{error_response, read_body, render};
use crate::app::App;
use crate::error::Error;
use crate::ops::{self, HttpInput, Input, OpEntry};

/// Request input an operation will get, owned so it can move to a blocking thread.
enum OwnedInput {
    Json(Value),
    Body(web::Bytes),
}

/// Serves row `op`. A query string that cannot be decoded gets the row's
/// malformed code; a body is read within its limits before policy and parsing.
pub async fn serve(
    app: web::Data<App>,
    op: &'static OpEntry,
    req: HttpRequest,
    payload: web::Payload,
) -> HttpResponse {
    let input = match op.http.input {
        HttpInput::Nothing => OwnedInput::Json(json!({})),
        HttpInput::Query(names) => match query_object(&req, names) {
            Ok(request) => OwnedInput::Json(request),
            Err(why) => return error_response(&Error::new(op.malformed, why)),
        },
        HttpInput::Body => match read_body(&app.config, payload).await {
            Ok(body) => OwnedInput::Body(body),
            Err(err) => return error_response(&err),
        },
    };
    // Operations do file and git I/O: off the async workers. A panic becomes 500 `internal`.
    let ctx = app.ctx.clone();
    let outcome = web::block(move || match input {
        OwnedInput::Json(value) => ops::dispatch(&ctx, op.name, Input::Json(value)),
        OwnedInput::Body(bytes) => ops::dispatch(&ctx, op.name, Input::Body(&bytes)),
    })
    .await;
    render(outcome, op.name)
}

/// Builds a JSON object from the named query parameters (first value wins;
/// absent ones are left out, so the operation reports them as missing).
fn query_object(req: &HttpRequest, names: &[&str]) -> Result<Value, String> {
    let pairs = web::Query::<Vec<(String, String)>>::from_query(req.query_string())
        .map_err(|e| format!("the query string could not be decoded: {e}"))?;
    let mut object = Map::new();
    for (key, value) in pairs.into_inner() {
        if names.contains(&key.as_str()) && !object.contains_key(&key) {
            object.insert(key, Value::String(value));
        }
    }
    Ok(Value::Object(object))
}
