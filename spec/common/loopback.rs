//! A small actix-web server on a loopback port, on a thread of its own: what
//! the fake model and the fake embedding server are made of (the specs' and the
//! benches' real HTTP stand-ins for a provider).

use std::net::TcpListener;
use std::sync::mpsc;

use actix_web::dev::ServerHandle;
use actix_web::{web, App, HttpServer};

/// Starts a server whose app `configure` sets up; answers its base URL
/// (`http://127.0.0.1:<port>/v1`) and its handle (to stop it).
pub fn serve<F>(configure: F) -> (String, ServerHandle)
where
    F: Fn(&mut web::ServiceConfig) + Clone + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        actix_web::rt::System::new().block_on(async move {
            let server = HttpServer::new(move || App::new().configure(configure.clone()))
                .workers(2)
                .listen(listener)
                .expect("listen")
                .run();
            tx.send(server.handle()).expect("send handle");
            server.await.expect("the loopback server runs");
        })
    });
    (base_url, rx.recv().expect("the loopback server started"))
}
