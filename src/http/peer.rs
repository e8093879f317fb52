//! Whether the caller of a request is still there. actix-web keeps running a
//! handler whose client has closed the connection, so a handler that waits
//! long (a coalesced sync) watches the connection's socket itself: each
//! connection's file descriptor is kept in its connection data
//! ([`remember`]), and [`unless_gone`] stops waiting once the peer has closed
//! or reset its side, dropping what it waited on (a sync's ticket, which
//! gives up the caller's place in the queue).

use std::any::Any;
use std::future::Future;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use actix_web::dev::Extensions;
use actix_web::HttpRequest;
use futures_util::future::{select, Either};

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
