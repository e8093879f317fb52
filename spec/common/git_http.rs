//! A real smart-HTTP git remote for the specs: Debian's `git http-backend`
//! (CGI) behind a small HTTP/1.1 server on a loopback port, with basic auth
//! and an optional delay before each push (a slow remote). It counts the
//! requests it serves, so a spec can tell how many pushes arrived.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;

/// Where Debian's git keeps the CGI program.
pub const HTTP_BACKEND: &str = "/usr/lib/git-core/git-http-backend";

/// A running git HTTP server over the bare repositories in `root`.
pub struct GitHttp {
    /// `http://127.0.0.1:<port>`; a repository `x.git` in `root` is at `{base}/x.git`.
    pub base: String,
    served: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

struct Settings {
    root: PathBuf,
    user: String,
    token: String,
    push_delay: Duration,
}

impl GitHttp {
    /// Serves the bare repositories in `root` to `user` with `token` (basic
    /// auth); each push waits `push_delay` first.
    pub fn start(root: &Path, user: &str, token: &str, push_delay: Duration) -> GitHttp {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let base = format!("http://{}", listener.local_addr().unwrap());
        let served = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let settings = Arc::new(Settings {
            root: root.to_path_buf(),
            user: user.to_string(),
            token: token.to_string(),
            push_delay,
        });
        let (served_by, stopped) = (served.clone(), stop.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let (settings, served) = (settings.clone(), served_by.clone());
                std::thread::spawn(move || {
                    let _ = serve(stream, &settings, &served);
                });
            }
        });
        GitHttp { base, served, stop }
    }

    /// Every request served so far, as `METHOD path?query status`.
    pub fn requests(&self) -> Vec<String> {
        self.served.lock().unwrap().clone()
    }

    /// How many pushes were accepted for processing (authenticated receive-pack POSTs).
    pub fn pushes(&self) -> usize {
        self.requests()
            .iter()
            .filter(|r| {
                r.starts_with("POST ") && r.contains("/git-receive-pack ") && r.ends_with(" 200")
            })
            .count()
    }
}

impl Drop for GitHttp {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.base.trim_start_matches("http://"));
    }
}

/// One request on one connection (answered with `Connection: close`).
fn serve(
    stream: TcpStream,
    settings: &Settings,
    served: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, target) = (
        parts.next().unwrap_or("").to_string(),
        parts.next().unwrap_or("").to_string(),
    );
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        let header = header.trim_end().to_string();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let body = if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        read_chunked(&mut reader)?
    } else {
        let length: usize = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        body
    };
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", settings.user, settings.token))
    );
    let mut out = stream;
    if header("authorization").as_deref() != Some(expected.as_str()) {
        served
            .lock()
            .unwrap()
            .push(format!("{method} {target} 401"));
        let text = "authentication required\n";
        write!(
            out,
            "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
            text.len()
        )?;
        return out.flush();
    }
    if method == "POST" && path.ends_with("/git-receive-pack") {
        std::thread::sleep(settings.push_delay);
    }
    let mut cgi = Command::new(HTTP_BACKEND)
        .env_clear()
        .env("GIT_PROJECT_ROOT", &settings.root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", &method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("CONTENT_TYPE", header("content-type").unwrap_or_default())
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("REMOTE_USER", &settings.user)
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("GIT_PROTOCOL", header("git-protocol").unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdin = cgi.stdin.take().expect("piped");
    let feeding = std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    let mut output = Vec::new();
    cgi.stdout.take().expect("piped").read_to_end(&mut output)?;
    let _ = feeding.join();
    cgi.wait()?;
    let split = output
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| (at, 4))
        .or_else(|| {
            output
                .windows(2)
                .position(|w| w == b"\n\n")
                .map(|at| (at, 2))
        });
    let Some((at, gap)) = split else {
        served
            .lock()
            .unwrap()
            .push(format!("{method} {target} 500"));
        write!(
            out,
            "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )?;
        return out.flush();
    };
    let head = String::from_utf8_lossy(&output[..at]).to_string();
    let content = &output[at + gap..];
    let mut status = "200 OK".to_string();
    let mut response_headers = String::new();
    for line in head.lines() {
        match line.split_once(':') {
            Some((name, value)) if name.eq_ignore_ascii_case("status") => {
                status = value.trim().to_string()
            }
            Some(_) => response_headers.push_str(&format!("{line}\r\n")),
            None => {}
        }
    }
    served.lock().unwrap().push(format!(
        "{method} {target} {}",
        status.split_whitespace().next().unwrap_or("")
    ));
    write!(
        out,
        "HTTP/1.1 {status}\r\n{response_headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        content.len()
    )?;
    out.write_all(content)?;
    out.flush()
}

fn read_chunked(reader: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size)?;
        let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        if size == 0 {
            let mut end = String::new();
            reader.read_line(&mut end)?;
            return Ok(body);
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        let mut crlf = [0; 2];
        reader.read_exact(&mut crlf)?;
    }
}
