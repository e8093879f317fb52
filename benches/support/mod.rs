//! Shared by the bench binaries: the real release server as a child process on
//! a loopback port, a keep-alive HTTP client, and medians.

#![allow(dead_code)] // each bench binary uses part of this

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::blocking::Client;

/// The `mirai` binary built for this bench, serving `root`.
pub struct Server {
    pub url: String,
    pub child: Child,
    pub client: Client,
    /// When the process was started (a first answer is timed from here).
    pub started: Instant,
}

impl Server {
    pub fn start(root: &Path) -> Server {
        Server::start_with_env(root, &[])
    }

    /// Starts the server with extra environment variables set.
    pub fn start_with_env(root: &Path, env: &[(&str, &str)]) -> Server {
        // MIRAI_BENCH_BIN runs the bench against another build (say, the code before a change).
        let binary = std::env::var_os("MIRAI_BENCH_BIN")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_mirai").into());
        Server::try_start(binary.as_ref(), root, env).expect("server did not start")
    }

    /// Starts `binary` serving `root`, or says how it ended when it does not
    /// answer within 30 s (a start-up that exits, say).
    pub fn try_start(
        binary: &std::ffi::OsStr,
        root: &Path,
        env: &[(&str, &str)],
    ) -> Result<Server, String> {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let started = Instant::now();
        let mut child = Command::new(binary)
            .arg("serve")
            .arg("--notes-root")
            .arg(root)
            .arg("--port")
            .arg(port.to_string())
            .env("RUST_LOG", "warn")
            .env("MIRAI_ALLOW_ROOT", "1")
            .env_remove("MIRAI_POLICY_MODE")
            .env_remove("MIRAI_API_TOKEN")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .spawn()
            .expect("start mirai");
        let url = format!("http://127.0.0.1:{port}");
        let client = Client::builder()
            .timeout(Duration::from_secs(300))
            .build()
            .unwrap();
        while client.get(format!("{url}/health")).send().is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("exited ({status})"));
            }
            if started.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                let _ = child.wait();
                return Err("did not answer within 30 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Server {
            url,
            child,
            client,
            started,
        })
    }

    /// CPU time the server process has used (user + system), in milliseconds.
    pub fn cpu_ms(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok());
        // After the name: state is field 0, utime 11, stime 12 (clock ticks of 10 ms).
        match (ticks(11), ticks(12)) {
            (Some(user), Some(system)) => (user + system) * 10.0,
            _ => f64::NAN,
        }
    }

    /// One `GET /health` round trip, in milliseconds: the baseline benches compare against.
    pub fn health_ms(&self) -> f64 {
        time_ms(|| {
            let response = self
                .client
                .get(format!("{}/health", self.url))
                .send()
                .unwrap();
            assert_eq!(response.status().as_u16(), 200);
        })
    }

    /// Resident memory of the server process, in MiB.
    pub fn rss_mib(&self) -> f64 {
        self.status_field("VmRSS:") / 1024.0
    }

    /// The most resident memory the server process has had, in MiB.
    pub fn peak_rss_mib(&self) -> f64 {
        self.status_field("VmHWM:") / 1024.0
    }

    /// The server process's threads.
    pub fn threads(&self) -> f64 {
        self.status_field("Threads:")
    }

    /// A number of `/proc/<pid>/status` (kB fields in kB), NaN when unreadable.
    fn status_field(&self, name: &str) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Times `f` once, in milliseconds.
pub fn time_ms(f: impl FnOnce()) -> f64 {
    let started = Instant::now();
    f();
    started.elapsed().as_secs_f64() * 1000.0
}

/// Median and 95th percentile of `samples` (ms).
pub fn median_p95(samples: &mut [f64]) -> (f64, f64) {
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.95))
}

pub fn report(name: &str, samples: &mut [f64]) -> f64 {
    let (median, p95) = median_p95(samples);
    println!(
        "{name:<44} median {median:>9.3} ms   p95 {p95:>9.3} ms   (n={})",
        samples.len()
    );
    median
}

/// The vault path from the command line, or a message saying how to make one.
pub fn vault_arg(bench: &str) -> std::path::PathBuf {
    let arg = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    match arg {
        Some(path) if Path::new(&path).is_dir() => path.into(),
        _ => {
            eprintln!(
                "usage: cargo bench --bench {bench} -- VAULT\n\
                 make a vault with: cargo run --release --example gen-notes -- --notes 10000 --seed 1 --git --out /tmp/vault10k"
            );
            std::process::exit(2);
        }
    }
}

/// Copies a folder (a vault with its .git) with `cp -a`, so a bench can write to it.
pub fn copy_tree(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "cp -a {} {}",
        from.display(),
        to.display()
    );
}

/// Runs `git -C dir ARGS` (as a bench identity) and answers its stdout; panics
/// with git's stderr when it fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `git fsck` of `dir` as the benches print it: `clean` or `FAILED`.
pub fn fsck(dir: &Path) -> &'static str {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["fsck", "--no-progress"])
        .output()
        .unwrap();
    if out.status.success() {
        "clean"
    } else {
        "FAILED"
    }
}

/// Words of four or more letters from the names of the notes `server` lists,
/// for queries that each find something.
pub fn note_name_words(server: &Server) -> Vec<String> {
    let answer: serde_json::Value = server
        .client
        .get(format!("{}/mcp/notes", server.url))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let notes: Vec<String> = serde_json::from_value(answer["notes"].clone()).unwrap();
    name_words(&notes)
}

/// Words of four or more letters from the names of `notes` (paths).
pub fn name_words(notes: &[String]) -> Vec<String> {
    notes
        .iter()
        .flat_map(|n| {
            n.rsplit('/')
                .next()
                .unwrap_or(n)
                .trim_end_matches(".md")
                .split([' ', '-', '_'])
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|w| w.len() >= 4 && w.chars().all(char::is_alphabetic))
        .collect()
}
