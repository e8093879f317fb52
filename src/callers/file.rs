//! `MIRAI_CALLERS_FILE`: TOML, one `[[caller]]` table per credential, read
//! whole and checked whole (every problem named, one line each), refused when
//! anyone but its owner may read or write it; and `mirai callers add`'s
//! append (a new caller with a fresh random token's hash).

use std::fmt;
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use sha2::{Digest, Sha256};
use toml::{Table, Value};

use super::rights::{clean_prefix, Prefixes, Right, Rights};
use super::Caller;

/// The problems of a callers file (or set), one line each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallersError(pub Vec<String>);

impl fmt::Display for CallersError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join("\n"))
    }
}

impl std::error::Error for CallersError {}

/// Largest callers file read.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// The keys a `[[caller]]` table may have.
const KEYS: [&str; 9] = [
    "name",
    "email",
    "token_sha256",
    "oauth_subject",
    "oauth_email",
    "can",
    "paths",
    "read_paths",
    "self_review",
];

/// Reads and checks the file at `path`: refused when group or others may
/// read or write it, or past 1 MiB.
pub fn load(path: &Path) -> Result<Vec<Caller>, CallersError> {
    let shown = path.display();
    let one = |line: String| CallersError(vec![line]);
    let meta = std::fs::metadata(path)
        .map_err(|e| one(format!("MIRAI_CALLERS_FILE {shown}: cannot read it: {e}")))?;
    if !meta.is_file() {
        return Err(one(format!(
            "MIRAI_CALLERS_FILE {shown}: not a regular file"
        )));
    }
    let mode = meta.permissions().mode();
    if mode & 0o066 != 0 {
        return Err(one(format!(
            "MIRAI_CALLERS_FILE {shown}: group or others may read or write it (mode {:03o}); \
             run chmod 600 on it",
            mode & 0o777
        )));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(one(format!(
            "MIRAI_CALLERS_FILE {shown}: {} bytes, more than the 1 MiB a callers file may hold",
            meta.len()
        )));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| one(format!("MIRAI_CALLERS_FILE {shown}: cannot read it: {e}")))?;
    parse(&text).map_err(|err| {
        CallersError(
            err.0
                .into_iter()
                .map(|line| format!("MIRAI_CALLERS_FILE {shown}: {line}"))
                .collect(),
        )
    })
}

/// Parses and checks a callers file's text: every problem, one line each.
pub fn parse(text: &str) -> Result<Vec<Caller>, CallersError> {
    let table: Table = text
        .parse()
        .map_err(|e: toml::de::Error| CallersError(vec![format!("not TOML: {}", e.message())]))?;
    let mut problems = Vec::new();
    let mut callers = Vec::new();
    for (key, value) in &table {
        if key != "caller" {
            problems.push(format!(
                "unknown key `{key}`: the file holds [[caller]] tables only"
            ));
            continue;
        }
        let Value::Array(entries) = value else {
            problems.push("`caller` must be [[caller]] tables".to_string());
            continue;
        };
        for (i, entry) in entries.iter().enumerate() {
            let Value::Table(entry) = entry else {
                problems.push(format!("caller {}: not a table", i + 1));
                continue;
            };
            if let Some(caller) = caller_of(entry, i + 1, &mut problems) {
                callers.push(caller);
            }
        }
    }
    for (i, caller) in callers.iter().enumerate() {
        for earlier in &callers[..i] {
            if earlier.name == caller.name {
                problems.push(format!("caller {:?} is named twice", caller.name));
            }
            if earlier.token_sha256.is_some() && earlier.token_sha256 == caller.token_sha256 {
                problems.push(format!(
                    "callers {:?} and {:?} have the same token_sha256: each credential needs its own",
                    earlier.name, caller.name
                ));
            }
            if earlier.oauth_subject.is_some() && earlier.oauth_subject == caller.oauth_subject {
                problems.push(format!(
                    "callers {:?} and {:?} have the same oauth_subject: one person signs in as one caller",
                    earlier.name, caller.name
                ));
            }
            let same_email = |a: &Option<String>, b: &Option<String>| {
                a.as_deref()
                    .zip(b.as_deref())
                    .is_some_and(|(a, b)| a.eq_ignore_ascii_case(b))
            };
            if same_email(&earlier.oauth_email, &caller.oauth_email) {
                problems.push(format!(
                    "callers {:?} and {:?} have the same oauth_email: one person signs in as one caller",
                    earlier.name, caller.name
                ));
            }
        }
    }
    if problems.is_empty() {
        Ok(callers)
    } else {
        Err(CallersError(problems))
    }
}

/// One `[[caller]]` table (the `n`th), its problems added to `problems`.
fn caller_of(entry: &Table, n: usize, problems: &mut Vec<String>) -> Option<Caller> {
    let before = problems.len();
    let name = entry.get("name").and_then(Value::as_str).unwrap_or("");
    let who = if name.is_empty() {
        format!("caller {n}")
    } else {
        format!("caller {name:?}")
    };
    for key in entry.keys() {
        if !KEYS.contains(&key.as_str()) {
            problems.push(format!(
                "{who}: unknown key `{key}` (known: {})",
                KEYS.join(", ")
            ));
        }
    }
    if let Some(why) = bad_name(name) {
        problems.push(format!("{who}: name {why}"));
    }
    let email = match entry.get("email") {
        None => format!("{name}@mirai.invalid"),
        Some(Value::String(email))
            if !email.is_empty() && !email.chars().any(|c| c.is_control() || "<>".contains(c)) =>
        {
            email.clone()
        }
        Some(_) => {
            problems.push(format!(
                "{who}: email must be a plain address (no <, > or control characters)"
            ));
            String::new()
        }
    };
    let oauth_subject = identity_key(entry, "oauth_subject", &who, problems);
    let oauth_email = identity_key(entry, "oauth_email", &who, problems);
    let token_sha256 = match entry.get("token_sha256") {
        Some(value) => match value.as_str().and_then(hex_digest) {
            Some(digest) => Some(digest),
            None => {
                problems.push(format!(
                    "{who}: token_sha256 must be 64 hex digits (the SHA-256 of the token, never the token)"
                ));
                None
            }
        },
        None if oauth_subject.is_none() && oauth_email.is_none() => {
            problems.push(format!(
                "{who}: token_sha256 is missing (or oauth_subject / oauth_email, for a caller who signs in)"
            ));
            None
        }
        None => None,
    };
    let mut can = Rights::none();
    match entry.get("can").map(strings) {
        Some(Some(names)) => {
            for right in names {
                match Right::named(&right) {
                    Some(r) => can.add(r),
                    None => problems.push(format!(
                        "{who}: unknown right {right:?} (known: read, write, propose, review, sync)"
                    )),
                }
            }
        }
        Some(None) => problems.push(format!("{who}: can must be a list of rights")),
        None => problems.push(format!(
            "{who}: can is missing (a list of read, write, propose, review, sync)"
        )),
    }
    let paths = prefixes(entry, "paths", &who, problems);
    let read_paths = prefixes(entry, "read_paths", &who, problems);
    let self_review = match entry.get("self_review") {
        None => false,
        Some(Value::Boolean(b)) => *b,
        Some(_) => {
            problems.push(format!("{who}: self_review must be true or false"));
            false
        }
    };
    (problems.len() == before).then(|| Caller {
        name: name.to_string(),
        email: Some(email),
        can,
        paths,
        read_paths,
        self_review,
        withheld: Rights::none(),
        token_sha256,
        oauth_subject,
        oauth_email,
    })
}

/// An identity provider's name for the caller (`oauth_subject`, `oauth_email`):
/// a non-empty string of at most 255 characters, none of them a control character.
fn identity_key(entry: &Table, key: &str, who: &str, problems: &mut Vec<String>) -> Option<String> {
    match entry.get(key)? {
        Value::String(text)
            if !text.is_empty()
                && text.chars().count() <= 255
                && !text.chars().any(char::is_control) =>
        {
            Some(text.clone())
        }
        _ => {
            problems.push(format!(
                "{who}: {key} must be a non-empty string of at most 255 characters, as the identity provider sends it"
            ));
            None
        }
    }
}

/// Why `name` cannot name a caller: 1 to 64 of letters, digits, `.`, `_`, `-`.
fn bad_name(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("is missing");
    }
    if name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return Some("must be 1 to 64 letters, digits, `.`, `_` or `-`");
    }
    None
}

fn strings(value: &Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect()
}

fn prefixes(entry: &Table, key: &str, who: &str, problems: &mut Vec<String>) -> Prefixes {
    let Some(value) = entry.get(key) else {
        return Prefixes::everything();
    };
    let Some(list) = strings(value) else {
        problems.push(format!("{who}: {key} must be a list of prefixes"));
        return Prefixes::everything();
    };
    let before = problems.len();
    let mut clean = Vec::new();
    for prefix in list {
        match clean_prefix(&prefix) {
            Some(why) => problems.push(format!("{who}: {key} entry {prefix:?} {why}")),
            None => clean.push(prefix),
        }
    }
    if clean.is_empty() && problems.len() == before {
        problems.push(format!(
            "{who}: {key} is an empty list; leave it out for everything"
        ));
    }
    Prefixes::of(clean)
}

fn hex_digest(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// A new random token (256 bits, hex) and the line of its hash.
pub fn token_line() -> (String, String) {
    let token: String = (0..2)
        .map(|_| uuid::Uuid::new_v4().simple().to_string())
        .collect();
    let hash = Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    (token, hash)
}

/// `text` as a TOML basic string (JSON's escapes are TOML's; what the
/// escapes cannot hold the check of the whole file refuses).
fn quoted(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

/// Appends a caller to the file at `path` (created mode 600 when missing)
/// with a new random token's hash, after checking that the file with it is
/// still a good one. Answers the token, which is stored nowhere.
pub fn append_caller(
    path: &Path,
    name: &str,
    can: &[String],
    paths: &[String],
    read_paths: &[String],
) -> Result<String, CallersError> {
    let (token, hash) = token_line();
    let list = |items: &[String]| {
        let quoted: Vec<String> = items.iter().map(|s| quoted(s)).collect();
        format!("[{}]", quoted.join(", "))
    };
    let mut block = format!(
        "\n[[caller]]\nname = {}\ntoken_sha256 = \"{hash}\"\ncan = {}\n",
        quoted(name),
        list(can)
    );
    if !paths.is_empty() {
        block.push_str(&format!("paths = {}\n", list(paths)));
    }
    if !read_paths.is_empty() {
        block.push_str(&format!("read_paths = {}\n", list(read_paths)));
    }
    let existing = if path.exists() {
        load(path)?;
        std::fs::read_to_string(path).map_err(|e| CallersError(vec![e.to_string()]))?
    } else {
        String::new()
    };
    parse(&format!("{existing}{block}"))?;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| CallersError(vec![format!("cannot open {}: {e}", path.display())]))?;
    file.write_all(block.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| CallersError(vec![format!("cannot write {}: {e}", path.display())]))?;
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "0000000000000000000000000000000000000000000000000000000000000001";

    #[test]
    fn a_good_file_gives_its_callers() {
        let text = format!(
            "[[caller]]\nname = \"agent\"\ntoken_sha256 = \"{HASH}\"\ncan = [\"propose\"]\npaths = [\"inbox/\"]\n"
        );
        let callers = parse(&text).unwrap();
        assert_eq!(callers[0].name, "agent");
        assert_eq!(callers[0].email.as_deref(), Some("agent@mirai.invalid"));
        assert!(callers[0].can.has(Right::Propose));
        assert!(!callers[0].can.has(Right::Write));
        assert!(callers[0].paths.holds("inbox/x.md"));
        assert!(callers[0].read_paths.is_everything());
    }

    #[test]
    fn a_caller_who_signs_in_needs_no_token_but_one_identity_each() {
        let text = "[[caller]]\nname = \"ann\"\noauth_subject = \"sub-1\"\ncan = [\"read\"]\n\
                    [[caller]]\nname = \"bea\"\noauth_email = \"Bea@Example.org\"\ncan = [\"read\"]\n";
        let callers = parse(text).unwrap();
        assert_eq!(callers[0].oauth_subject.as_deref(), Some("sub-1"));
        assert_eq!(callers[0].token_sha256, None);
        let twice = format!(
            "{text}[[caller]]\nname = \"cy\"\noauth_subject = \"sub-1\"\noauth_email = \"bea@example.org\"\ncan = []\n"
        );
        let err = parse(&twice).unwrap_err();
        assert_eq!(err.0.len(), 2, "{err}");
        let neither = parse("[[caller]]\nname = \"dan\"\ncan = []\n").unwrap_err();
        assert!(neither.0[0].contains("oauth_subject"), "{neither}");
        let blank =
            parse("[[caller]]\nname = \"dan\"\noauth_subject = \"\"\ncan = []\n").unwrap_err();
        assert!(blank.0[0].contains("oauth_subject must be"), "{blank}");
    }

    #[test]
    fn every_problem_is_one_line() {
        let text = format!(
            "colour = 1\n[[caller]]\nname = \"a\"\ntoken_sha256 = \"{HASH}\"\ncan = [\"fly\"]\nmesage = \"x\"\npaths = [\"../up/\"]\n\
             [[caller]]\nname = \"a\"\ntoken_sha256 = \"{HASH}\"\ncan = [\"read\"]\n"
        );
        let err = parse(&text).unwrap_err();
        let lines = err.0.join("\n");
        for needle in [
            "unknown key `colour`",
            "unknown key `mesage`",
            "unknown right \"fly\"",
            "paths entry \"../up/\"",
        ] {
            assert!(lines.contains(needle), "{needle} in {lines}");
        }
        assert_eq!(err.0.len(), 4, "{lines}");
        let dup = parse(&format!(
            "[[caller]]\nname = \"a\"\ntoken_sha256 = \"{HASH}\"\ncan = []\n[[caller]]\nname = \"a\"\ntoken_sha256 = \"{HASH}\"\ncan = []\n"
        ))
        .unwrap_err();
        assert_eq!(dup.0.len(), 2, "{dup}");
    }

    #[test]
    fn a_file_others_may_read_is_refused_and_append_keeps_it_private() {
        let dir = std::env::temp_dir().join(format!("mirai-callers-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("callers.toml");
        let token =
            append_caller(&path, "bot", &["write".into()], &["inbox/".into()], &[]).unwrap();
        let callers = load(&path).unwrap();
        assert_eq!(callers.len(), 1);
        let hash: String = Sha256::digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert!(std::fs::read_to_string(&path).unwrap().contains(&hash));
        assert!(!std::fs::read_to_string(&path).unwrap().contains(&token));
        assert!(append_caller(&path, "bot", &["write".into()], &[], &[]).is_err());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains("chmod 600"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
