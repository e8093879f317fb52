//! A hostile provider for the specs: a real HTTP/1.1 server on a loopback
//! port whose answers are raw bytes the spec writes (endless bodies, huge
//! answers, echoes of what it was sent), keeping the target of every request.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// One request as the server read it.
#[derive(Debug, Clone)]
pub struct Request {
    /// The request target (`/v1/chat/completions?key=...`).
    pub target: String,
    pub headers: String,
    pub body: Vec<u8>,
}

type Answerer = dyn Fn(&Request, &mut TcpStream) + Send + Sync;

pub struct Hostile {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl Hostile {
    /// Serves every connection on its own thread; `answer` writes the whole answer.
    pub fn start(answer: impl Fn(&Request, &mut TcpStream) + Send + Sync + 'static) -> Hostile {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let base = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let answer: Arc<Answerer> = Arc::new(answer);
        let kept = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (answer, kept) = (answer.clone(), kept.clone());
                std::thread::spawn(move || {
                    let mut stream = stream;
                    if let Some(request) = read_request(&stream) {
                        kept.lock().unwrap().push(request.clone());
                        answer(&request, &mut stream);
                    }
                });
            }
        });
        Hostile { base, requests }
    }

    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

fn read_request(stream: &TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let target = line.split(' ').nth(1)?.to_string();
    let mut headers = String::new();
    let mut length = 0;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        if header == "\r\n" || header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        headers.push_str(&header);
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Request {
        target,
        headers,
        body,
    })
}

/// A whole answer with a length.
pub fn respond(stream: &mut TcpStream, status: u16, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
}

/// A 200 whose chunked body repeats `piece` until the client goes away.
pub fn endless(stream: &mut TcpStream, piece: &[u8]) {
    let head =
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
    chunk.extend_from_slice(piece);
    chunk.extend_from_slice(b"\r\n");
    while stream.write_all(&chunk).is_ok() {}
}
