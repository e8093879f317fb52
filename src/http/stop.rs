//! A prompt stop: `mirai serve` is gone within a second of SIGTERM (or SIGINT,
//! SIGQUIT), whatever its clients hold open: MCP sessions and their streams,
//! `/events`, keep-alive connections.
//!
//! On the signal the server stops gracefully: it takes no new connection,
//! idle keep-alive connections are closed, and requests in flight get
//! [`GRACE`] to finish. Whatever is still running then (an endless stream, a
//! long sandbox program, a write) is cut: its connection is dropped, and the
//! caller of [`serve_until_signal`] goes on to exit. A write cut half-way was
//! never acknowledged; it is finished or undone at the next start, as after a
//! kill (`repo/recover.rs`). A watchdog ends the process at [`BOUND`] after
//! the signal, whatever the last steps (writing the index artifact) still do:
//! the artifact is replaced whole or not at all, and the index catches up with
//! the notes when it is next loaded.

use std::io;
use std::pin::pin;
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::rt::signal::unix::{signal, SignalKind};
use futures_util::future::{select, Either};

/// How long requests in flight may take to finish once a stop is asked.
pub const GRACE: Duration = Duration::from_millis(500);

/// When, after the signal, the process ends whatever it is still doing.
pub const BOUND: Duration = Duration::from_millis(900);

/// Runs `server` until it ends by itself or a stop signal arrives; after a
/// signal, until the requests in flight are done or [`GRACE`] has passed,
/// whichever is first, with the watchdog armed (see the module's comment).
pub async fn serve_until_signal(server: Server) -> io::Result<()> {
    let handle = server.handle();
    let mut server = pin!(server);
    let kind = match select(server.as_mut(), pin!(stop_signal())).await {
        Either::Left((served, _)) => return served,
        Either::Right((kind, _)) => kind,
    };
    arm_watchdog();
    log::info!(
        "{kind} received: stopping; requests in flight get {} ms to finish",
        GRACE.as_millis()
    );
    actix_web::rt::spawn(handle.stop(true));
    match select(server, pin!(actix_web::rt::time::sleep(GRACE))).await {
        Either::Left((served, _)) => served,
        Either::Right(((), _)) => {
            // Dropping the server stops its workers without waiting.
            log::warn!(
                "requests or streams still open {} ms after {kind} were cut",
                GRACE.as_millis()
            );
            Ok(())
        }
    }
}

/// The first of SIGTERM, SIGINT and SIGQUIT, by name. A signal that cannot be
/// listened to is left to its default action (which ends the process).
async fn stop_signal() -> &'static str {
    let listen = |kind: SignalKind, name: &'static str| {
        let mut stream = signal(kind).ok();
        async move {
            match stream.as_mut() {
                Some(stream) => {
                    stream.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
            name
        }
    };
    let term = pin!(listen(SignalKind::terminate(), "SIGTERM"));
    let int = pin!(listen(SignalKind::interrupt(), "SIGINT"));
    let quit = pin!(listen(SignalKind::quit(), "SIGQUIT"));
    match select(term, select(int, quit)).await {
        Either::Left((name, _)) => name,
        Either::Right((Either::Left((name, _)) | Either::Right((name, _)), _)) => name,
    }
}

/// Ends the process [`BOUND`] from now, whatever is still running.
fn arm_watchdog() {
    let spawned = std::thread::Builder::new()
        .name("mirai-stop".into())
        .spawn(|| {
            std::thread::sleep(BOUND);
            log::warn!(
                "still stopping {} ms after the signal: exiting now",
                BOUND.as_millis()
            );
            std::process::exit(0);
        });
    if let Err(e) = spawned {
        log::warn!("cannot start the stop watchdog ({e}); stopping without it");
    }
}
