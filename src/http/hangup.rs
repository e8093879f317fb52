//! SIGHUP reloads the callers file: the new set replaces the old whole, so a
//! request in flight keeps the set it started with and none is dropped; a file
//! with problems keeps the old set, and the log says why.

use std::sync::Arc;

use actix_web::rt::signal::unix::{signal, SignalKind};

use crate::callers::CallerBook;

/// Reloads `book` on every SIGHUP, for as long as the server runs.
pub async fn reload_on_hangup(book: Arc<CallerBook>) {
    let Ok(mut hangups) = signal(SignalKind::hangup()) else {
        log::warn!(
            "callers: cannot listen for SIGHUP; restart mirai to take a changed callers file"
        );
        return;
    };
    while hangups.recv().await.is_some() {
        let book = Arc::clone(&book);
        let reloaded = actix_web::rt::task::spawn_blocking(move || book.reload()).await;
        match reloaded {
            Ok(Ok(count)) => log::info!("callers: reloaded on SIGHUP, {count} callers"),
            Ok(Err(problems)) => log::warn!(
                "callers: SIGHUP reload refused, the callers before it stay: {}",
                problems.0.join("; ")
            ),
            Err(_) => {
                log::error!("callers: the SIGHUP reload panicked; the callers before it stay")
            }
        }
    }
}
