//! `POST /hooks/push`: a forge's push webhook triggers a sync (pull, then
//! push) by taking a place in the `repo.sync` row's next coalesced sync and
//! awaiting its answer (no thread is held). Its credential is the body's HMAC in `X-Hub-Signature-256` under
//! `MIRAI_WEBHOOK_SECRET`, never the bearer token (ARCHITECTURE.md, "The token
//! guards the network"); without a secret and a remote it answers 404. The body
//! is trusted for nothing else: a good signature only says "pull now".

use actix_web::{web, HttpRequest, HttpResponse};

use super::peer::unless_gone;
use super::respond::{error_response, gone, read_body, render};
use crate::app::App;
use crate::error::{Error, ErrorCode};
use crate::ops::adapters::{webhook_verified, WEBHOOK_SIGNATURE_HEADER};
use crate::ops::{self, Input};

pub async fn push(app: web::Data<App>, req: HttpRequest, payload: web::Payload) -> HttpResponse {
    let (Some(secret), true) = (app.config.webhook_secret.clone(), app.ctx.sync.is_some()) else {
        return error_response(&Error::not_found(
            "POST /hooks/push is off: it needs MIRAI_WEBHOOK_SECRET and MIRAI_GIT_REMOTE",
        ));
    };
    let body = match read_body(&app.config, payload).await {
        Ok(body) => body,
        Err(err) => return error_response(&err),
    };
    let signature = req
        .headers()
        .get(WEBHOOK_SIGNATURE_HEADER)
        .and_then(|value| value.to_str().ok());
    if !webhook_verified(&secret, &body, signature) {
        return error_response(&Error::new(
            ErrorCode::Unauthorized,
            "missing or wrong webhook signature: the forge must sign the body with \
             MIRAI_WEBHOOK_SECRET (X-Hub-Signature-256: sha256=<HMAC-SHA256>)",
        ));
    }
    let synced = match ops::dispatch_sync(&app.ctx, "repo.sync", Input::Json(serde_json::json!({})))
    {
        // A forge that went away gives up its place (the ticket is dropped).
        Ok(ticket) => match unless_gone(&req, ticket.answer()).await {
            Some(synced) => synced,
            None => return error_response(&gone()),
        },
        Err(err) => Err(err),
    };
    render(Ok(synced), "/hooks/push")
}
