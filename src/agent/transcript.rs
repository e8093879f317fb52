//! Run transcripts: every event of a run as one JSON line in
//! `NOTES_ROOT/.mirai/runs/<run_id>.jsonl`, and the same events handed to a
//! live listener (the server-sent event stream of `POST /agent/run`). Each
//! string stored is cut at [`FIELD_CAP`] bytes, saying how much was left out.
//! The first event (`run_start`) names the caller that started the run;
//! [`Seer`] decides whose runs a caller may list and read.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};

use chrono::{SecondsFormat, Utc};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::callers::{Caller, Right};
use crate::error::{Error, Result};
use crate::ops::adapters::open_folder;

/// The most bytes of one string field a transcript line keeps.
pub const FIELD_CAP: usize = 64 * 1024;

/// `value` with every string longer than [`FIELD_CAP`] cut at a character
/// boundary and marked with the number of bytes left out.
fn capped(value: &mut Value) {
    match value {
        Value::String(text) if text.len() > FIELD_CAP => {
            let mut end = FIELD_CAP;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let left_out = text.len() - end;
            text.truncate(end);
            text.push_str(&format!("… [{left_out} more bytes not kept]"));
        }
        Value::Array(items) => items.iter_mut().for_each(capped),
        Value::Object(fields) => fields.values_mut().for_each(capped),
        _ => {}
    }
}

/// One event: its kind, when it happened, and its fields.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub at: String,
    #[serde(flatten)]
    pub data: Map<String, Value>,
}

impl Event {
    pub fn new(kind: &'static str, data: Value) -> Event {
        let data = match data {
            Value::Object(map) => map,
            other => Map::from_iter([("value".to_string(), other)]),
        };
        Event {
            kind,
            at: Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true),
            data,
        }
    }
}

/// Writes a run's events as they happen.
pub struct Transcript<'a> {
    file: Option<File>,
    listener: &'a mut dyn FnMut(&Event),
    /// Why the file could not be written, once (the run goes on without it).
    pub problem: Option<String>,
}

impl<'a> Transcript<'a> {
    pub fn create(
        runs: &Runs,
        run_id: &str,
        listener: &'a mut dyn FnMut(&Event),
    ) -> Transcript<'a> {
        let name = format!("{run_id}.jsonl");
        let opened = runs.folder(true).and_then(|dir| {
            let dir = dir.ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
            let mut options = OpenOptions::new();
            options
                .create_new(true)
                .append(true)
                .follow(FollowSymlinks::No)
                .mode(0o644);
            dir.open_with(&name, &options).map(|file| file.into_std())
        });
        let (file, problem) = match opened {
            Ok(file) => (Some(file), None),
            Err(e) => (None, Some(format!(".mirai/runs/{name}: {e}"))),
        };
        Transcript {
            file,
            listener,
            problem,
        }
    }

    pub fn record(&mut self, kind: &'static str, data: Value) {
        let event = Event::new(kind, data);
        if let Some(file) = &mut self.file {
            let mut stored = serde_json::to_value(&event).unwrap_or_default();
            capped(&mut stored);
            let mut line = serde_json::to_vec(&stored).unwrap_or_default();
            line.push(b'\n');
            if let Err(e) = file.write_all(&line) {
                self.problem = Some(e.to_string());
                self.file = None;
            }
        }
        (self.listener)(&event);
    }
}

/// `.mirai/runs/` of a notes root, always reached from the root without
/// following a symlink (ARCHITECTURE.md, "The root is a wall, not a check"): a
/// `.mirai` or `runs` swapped for a link to elsewhere makes transcripts fail,
/// never land or be read there.
#[derive(Debug, Clone)]
pub struct Runs {
    notes_root: PathBuf,
}

impl Runs {
    pub fn new(notes_root: &Path) -> Runs {
        Runs {
            notes_root: notes_root.to_path_buf(),
        }
    }

    /// The folder (`None`: there is none yet and `create` was false).
    fn folder(&self, create: bool) -> io::Result<Option<Dir>> {
        let mut dir = Dir::open_ambient_dir(&self.notes_root, cap_std::ambient_authority())?;
        for name in [".mirai", "runs"] {
            dir = match open_folder(&dir, name, create) {
                Ok(Some(next)) => next,
                Ok(None) => return Ok(None),
                Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
                    return Err(io::Error::other(
                        ".mirai/runs must be a real folder inside the notes root, not a symlink; \
                         mirai never follows it",
                    ))
                }
                Err(e) => return Err(e),
            };
        }
        Ok(Some(dir))
    }
}

/// Run ids are UUIDs; anything else never names a file.
fn transcript_name(run_id: &str) -> Result<String> {
    uuid::Uuid::parse_str(run_id).map_err(|_| {
        Error::not_found(format!(
            "no run {run_id:?}: run ids are UUIDs, as POST /agent/run answers them"
        ))
    })?;
    Ok(format!("{}.jsonl", run_id.to_ascii_lowercase()))
}

/// Whose runs a caller sees. A run's transcript quotes what the run read
/// with its starter's rights, so a caller whose `read_paths` hide anything (or
/// that may not read at all) sees only the runs it started itself; the
/// operator and a caller that reads everything see every run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seer {
    Everyone,
    /// Only runs whose `run_start` names this caller.
    Own(String),
}

impl Seer {
    /// What `caller` (`None`: the operator, or a server without callers) sees.
    pub fn of(caller: Option<&Caller>) -> Seer {
        match caller {
            Some(c) if !(c.can.has(Right::Read) && c.read_paths.is_everything()) => {
                Seer::Own(c.name.clone())
            }
            _ => Seer::Everyone,
        }
    }

    /// Whether a run started by `starter` (its `run_start`'s `caller`; `None`
    /// for the operator's runs and those recorded before callers were named) is seen.
    pub fn sees(&self, starter: Option<&str>) -> bool {
        match self {
            Seer::Everyone => true,
            Seer::Own(name) => starter == Some(name.as_str()),
        }
    }
}

/// The caller a transcript's first event names.
fn starter(first: Option<&Value>) -> Option<&str> {
    first.and_then(|e| e["caller"].as_str())
}

/// One run's transcript file, opened without following links.
fn open(runs: &Runs, run_id: &str) -> Result<File> {
    let name = transcript_name(run_id)?;
    let opened = runs.folder(false).and_then(|dir| {
        let dir = dir.ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let mut options = OpenOptions::new();
        options
            .read(true)
            .follow(FollowSymlinks::No)
            .custom_flags(libc::O_NONBLOCK);
        let file: File = dir.open_with(&name, &options)?.into_std();
        if !file.metadata()?.is_file() {
            return Err(io::Error::other("not a regular file"));
        }
        Ok(file)
    });
    opened.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => missing(run_id),
        _ => Error::internal(format!("cannot read the transcript of {run_id}: {e}")),
    })
}

fn missing(run_id: &str) -> Error {
    Error::not_found(format!("no run {run_id}"))
}

/// Every event of one run, in order.
pub fn read(runs: &Runs, run_id: &str) -> Result<Vec<Value>> {
    Ok(BufReader::new(open(runs, run_id)?)
        .lines()
        .map_while(std::io::Result::ok)
        .filter_map(|line| serde_json::from_str(&line).ok())
        .collect())
}

/// Every event of one run, if `seer` sees it; a run it may not see is
/// `not_found` in the very words of a missing one.
pub fn read_seen(runs: &Runs, run_id: &str, seer: &Seer) -> Result<Vec<Value>> {
    if !seer.sees(starter(first_event(runs, run_id)?.as_ref())) {
        return Err(missing(run_id));
    }
    read(runs, run_id)
}

/// The most bytes of a transcript's first line read to learn who started the
/// run (`run_start`: its task is cut at [`FIELD_CAP`]).
const FIRST_LINE_CAP: u64 = 2 * FIELD_CAP as u64;

/// A run's first event (`run_start`), reading no further than its line.
fn first_event(runs: &Runs, run_id: &str) -> Result<Option<Value>> {
    let mut line = String::new();
    BufReader::new(open(runs, run_id)?.take(FIRST_LINE_CAP))
        .read_line(&mut line)
        .map_err(|e| Error::internal(format!("cannot read the transcript of {run_id}: {e}")))?;
    Ok(serde_json::from_str(&line).ok())
}

/// A line per recent run, newest first (v7 run ids sort by time).
#[derive(Debug, Serialize)]
pub struct RunSummary {
    pub run_id: String,
    /// The caller that started it (`null`: the operator, or no callers).
    pub caller: Option<String>,
    pub started_at: Option<String>,
    pub task: Option<String>,
    /// `null` while the run is still going (or if it was cut off).
    pub stopped: Option<String>,
    /// mirai's own one-line account of what the run changed (`null` before
    /// it ends, and for runs recorded before outcomes were).
    pub outcome: Option<String>,
    /// Whether the run's final reply was contradicted by mirai's record.
    pub reply_contradicted: bool,
}

/// The most transcripts one listing looks into for runs a scoped caller
/// started (each only its first line), so a listing stays bounded however
/// many runs others made.
pub const MAX_SCANNED: usize = 2000;

/// The newest `limit` runs `seer` sees, newest first.
pub fn list(runs: &Runs, limit: usize, seer: &Seer) -> Result<Vec<RunSummary>> {
    let entries = match runs.folder(false).and_then(|dir| match dir {
        Some(dir) => dir.entries().map(Some),
        None => Ok(None),
    }) {
        Ok(Some(entries)) => entries,
        Ok(None) => return Ok(Vec::new()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::internal(format!("cannot list runs: {e}"))),
    };
    let mut ids: Vec<String> = entries
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let id = name.strip_suffix(".jsonl")?;
            uuid::Uuid::parse_str(id).ok().map(|_| id.to_string())
        })
        .collect();
    ids.sort_unstable_by(|a, b| b.cmp(a));
    let seen: Vec<String> = match seer {
        Seer::Everyone => ids.into_iter().take(limit).collect(),
        Seer::Own(_) => ids
            .into_iter()
            .take(MAX_SCANNED)
            .filter(|id| {
                first_event(runs, id).is_ok_and(|first| seer.sees(starter(first.as_ref())))
            })
            .take(limit)
            .collect(),
    };
    Ok(seen
        .into_iter()
        .map(|run_id| {
            let events = read(runs, &run_id).unwrap_or_default();
            let first = events.first();
            let end = events.iter().rev().find(|e| e["type"] == "run_end");
            RunSummary {
                caller: starter(first).map(str::to_string),
                started_at: first.and_then(|e| e["at"].as_str()).map(str::to_string),
                task: first.and_then(|e| e["task"].as_str()).map(str::to_string),
                stopped: end.and_then(|e| e["stopped"].as_str()).map(str::to_string),
                outcome: end
                    .and_then(|e| e["outcome"]["summary"].as_str())
                    .map(str::to_string),
                reply_contradicted: end.is_some_and(|e| e["reply_contradicted"] == true),
                run_id,
            }
        })
        .collect())
}
