//! Whether the caller of a request is still there. actix-web keeps running a
//! handler whose client has closed the connection, so a handler that waits
//! long (a coalesced sync) watches the connection's socket itself: each
//! connection's file descriptor is kept in its connection data
//! ([`remember`]), and [`unless_gone`] stops waiting once the peer has closed
//! or reset its side, dropping what it waited on (a sync's ticket, which
//! gives up the caller's place in the queue).
//!
//! A streamed answer (the change stream, MCP's streams) is [`watched`]: it
//! ends as soon as its client has closed the connection (not at the next
//! write), and a stream the connection stops taking chunks from for
//! [`STALLED_AFTER`] (a client that reads nothing, so every buffer on the way
//! is full) has its connection shut down, so whatever the stream holds (its
//! place under `MIRAI_EVENTS_MAX_CLIENTS`) is given back with it.

use std::any::Any;
use std::future::Future;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use actix_web::dev::Extensions;
use actix_web::HttpRequest;
use futures_util::future::{select, Either};
use futures_util::{Stream, StreamExt};
use tokio::sync::Notify;

/// How often a waiting handler looks at its connection.
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// The socket of one connection; valid while the connection (and so any of
/// its requests' handlers) lives.
#[derive(Debug, Clone, Copy)]
struct PeerSocket(RawFd);

/// Keeps the socket of a new connection for [`unless_gone`] (`on_connect`).
pub fn remember(connection: &dyn Any, data: &mut Extensions) {
    if let Some(tcp) = connection.downcast_ref::<actix_web::rt::net::TcpStream>() {
        data.insert(PeerSocket(tcp.as_raw_fd()));
    }
}

impl PeerSocket {
    /// The peer closed its side (or the connection broke): nobody will read an answer.
    fn closed(self) -> bool {
        let mut poll = libc::pollfd {
            fd: self.0,
            events: libc::POLLRDHUP,
            revents: 0,
        };
        // SAFETY: one pollfd on the stack, a zero timeout; the descriptor is the
        // connection's own, open while this request's handler runs.
        #[allow(unsafe_code)]
        let ready = unsafe { libc::poll(&mut poll, 1, 0) };
        ready > 0 && poll.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
    }

    /// Shuts the connection down both ways: the server's next read or write
    /// on it fails, so it drops the connection and the answer it was writing.
    fn shut_down(self) {
        // SAFETY: the descriptor is the connection's own and open (see watch).
        #[allow(unsafe_code)]
        unsafe {
            libc::shutdown(self.0, libc::SHUT_RDWR);
        }
    }
}

/// How long a streamed answer may wait for its connection to take the next
/// chunk before the connection is shut down.
pub const STALLED_AFTER: Duration = Duration::from_secs(20);

/// How often a streamed answer's connection is looked at.
const LOOK_STREAM_EVERY: Duration = Duration::from_millis(250);

/// A streamed answer's state, shared with the task that watches its connection.
struct Pulse {
    born: Instant,
    /// Whether the connection is waiting for the next chunk (the stream is polled).
    asking: AtomicBool,
    /// When `asking` last changed, in ms since `born`.
    since: AtomicU64,
    /// Told when the stream must end (its client left).
    end: Notify,
    ended: AtomicBool,
}

impl Pulse {
    fn mark(&self, asking: bool) {
        let now = self.born.elapsed().as_millis() as u64;
        self.since.store(now, Ordering::Release);
        self.asking.store(asking, Ordering::Release);
    }

    /// Whether a chunk has waited longer than [`STALLED_AFTER`] for the connection to take it.
    fn stalled(&self) -> bool {
        let idle = self.born.elapsed().as_millis() as u64 - self.since.load(Ordering::Acquire);
        !self.asking.load(Ordering::Acquire) && idle > STALLED_AFTER.as_millis() as u64
    }

    fn finish(&self) {
        self.ended.store(true, Ordering::Release);
        self.end.notify_one();
    }
}

/// `body` as the answer to `req`, watched: it ends once the client has
/// closed the connection, and the connection is shut down when it has not
/// taken a chunk for [`STALLED_AFTER`]. Whatever `body` holds is dropped with it.
pub fn watched<S, T>(req: &HttpRequest, body: S) -> impl Stream<Item = T> + 'static
where
    S: Stream<Item = T> + 'static,
    T: 'static,
{
    let pulse = Arc::new(Pulse {
        born: Instant::now(),
        asking: AtomicBool::new(false),
        since: AtomicU64::new(0),
        end: Notify::new(),
        ended: AtomicBool::new(false),
    });
    if let Some(peer) = req.conn_data::<PeerSocket>().copied() {
        actix_web::rt::spawn(watch(peer, Arc::downgrade(&pulse)));
    }
    let body: Pin<Box<S>> = Box::pin(body);
    futures_util::stream::unfold((body, pulse), |(mut body, pulse)| async move {
        if pulse.ended.load(Ordering::Acquire) {
            return None;
        }
        pulse.mark(true);
        let item = {
            let next = body.next();
            let end = pulse.end.notified();
            futures_util::pin_mut!(next, end);
            match select(next, end).await {
                Either::Left((Some(item), _)) => item,
                _ => return None,
            }
        };
        pulse.mark(false);
        Some((item, (body, pulse)))
    })
}

/// Watches one streamed answer's connection until the answer is dropped:
/// ends it when the client has gone, shuts the connection down when it has
/// stalled. Runs on the connection's own worker thread, so between finding
/// the answer alive and shutting the socket down nothing else runs: the
/// descriptor is still the connection's.
async fn watch(peer: PeerSocket, pulse: Weak<Pulse>) {
    loop {
        actix_web::rt::time::sleep(LOOK_STREAM_EVERY).await;
        let Some(pulse) = pulse.upgrade() else {
            return;
        };
        if peer.closed() {
            pulse.finish();
            peer.shut_down();
            return;
        }
        if pulse.stalled() {
            log::warn!(
                "a streamed answer's client took nothing for {}s; its connection was closed",
                STALLED_AFTER.as_secs()
            );
            pulse.finish();
            peer.shut_down();
            return;
        }
    }
}

/// `work`'s output, or `None` once the caller of `req` has gone away (then
/// `work` is dropped unfinished). A request with no socket known waits for `work`.
pub async fn unless_gone<T>(req: &HttpRequest, work: impl Future<Output = T>) -> Option<T> {
    let Some(peer) = req.conn_data::<PeerSocket>().copied() else {
        return Some(work.await);
    };
    let gone = async move {
        loop {
            actix_web::rt::time::sleep(LOOK_EVERY).await;
            if peer.closed() {
                return;
            }
        }
    };
    match select(Box::pin(work), Box::pin(gone)).await {
        Either::Left((output, _)) => Some(output),
        Either::Right(((), _)) => None,
    }
}
