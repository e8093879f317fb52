//! Named callers: each credential a person or an agent, with its own rights
//! (`can`), the prefixes it may write under (`paths`) and read (`read_paths`),
//! and its name and email on every commit made for it. Knows no ops, HTTP or git.
//!
//! [`Callers`] is one validated set (the file `MIRAI_CALLERS_FILE` plus the
//! shorthands `MIRAI_API_TOKEN` and `MIRAI_REVIEWER_TOKEN`); [`CallerBook`]
//! holds the live set and swaps it whole on reload. [`Callers::identify`] is
//! the one lookup from a presented credential (a bearer token, or a person
//! signed in through an identity provider: [`SignedIn`]) to a caller.

mod file;
mod rights;

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

pub use file::{append_caller, load, parse, token_line, CallersError};
pub use rights::{Prefixes, Right, Rights};

/// One credential's holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Unique in the set; the `Mirai-Caller` trailer's value.
    pub name: String,
    /// The commit author's email (`None`: a shorthand, which commits as mirai).
    pub email: Option<String>,
    pub can: Rights,
    /// Where it may write or propose (everything when empty).
    pub paths: Prefixes,
    /// What it may read (everything when empty); the rest is hidden from it.
    pub read_paths: Prefixes,
    /// Whether it may approve proposals it asked for itself.
    pub self_review: bool,
    /// The rights it would hold but its access token's scopes withheld (a
    /// person signed in through OAuth; none otherwise): a token asked for
    /// with more scopes would grant them (the `insufficient_scope` step-up).
    pub withheld: Rights,
    /// The SHA-256 of its bearer token (`None`: it only signs in).
    token_sha256: Option<[u8; 32]>,
    /// The identity provider's `sub` this caller signs in as.
    oauth_subject: Option<String>,
    /// The verified email this caller signs in with.
    oauth_email: Option<String>,
}

impl Caller {
    /// A caller that only authors a commit (no rights, no token): the one who
    /// asked for a proposal, when a reviewer applies it.
    pub fn author(name: String, email: String) -> Caller {
        Caller {
            name,
            email: Some(email),
            can: Rights::none(),
            paths: Prefixes::everything(),
            read_paths: Prefixes::everything(),
            self_review: false,
            withheld: Rights::none(),
            token_sha256: None,
            oauth_subject: None,
            oauth_email: None,
        }
    }

    /// Whether this caller's commits name it (a file's caller); the
    /// shorthands commit as mirai, as they always did.
    pub fn authors_commits(&self) -> bool {
        self.email.is_some()
    }
}

/// A presented credential: what [`Callers::identify`] maps to a caller.
#[derive(Debug, Clone, Copy)]
pub enum Credential<'a> {
    /// A bearer token, as sent.
    Bearer(&'a str),
    /// A person an identity provider signed in (a verified access token).
    SignedIn(&'a SignedIn),
}

/// Who a verified access token says signed in, and what it lets them do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedIn {
    /// The token's `sub`.
    pub subject: String,
    /// Its `email`, only when the token says `email_verified`.
    pub email: Option<String>,
    /// The rights its scopes grant.
    pub scopes: Rights,
    /// The rights a subject with no entry in the callers file gets
    /// (`MIRAI_OAUTH_DEFAULT_CAN`), before the scopes cut them.
    pub unlisted: Rights,
    /// A name for a subject with no verified email (`sub@issuer-host`), used
    /// as its commits' email.
    pub fallback_email: String,
}

/// Names the shorthands take.
pub const API_NAME: &str = "api";
pub const REVIEWER_NAME: &str = "reviewer";

/// One validated set of callers.
#[derive(Debug, Clone, Default)]
pub struct Callers {
    list: Vec<Arc<Caller>>,
    /// From `MIRAI_CALLERS_FILE` (not the shorthands alone).
    from_file: bool,
}

impl Callers {
    /// The set: `file`'s callers (already parsed) and the shorthands for the
    /// API and reviewer tokens; a name or token used twice is a problem.
    pub fn new(
        file: Vec<Caller>,
        from_file: bool,
        api_token: Option<&str>,
        reviewer_token: Option<&str>,
    ) -> Result<Callers, CallersError> {
        let mut list = file;
        if let Some(token) = api_token {
            list.push(shorthand(API_NAME, token, false));
        }
        if let Some(token) = reviewer_token {
            list.push(shorthand(REVIEWER_NAME, token, true));
        }
        let mut problems = Vec::new();
        for (i, caller) in list.iter().enumerate() {
            for earlier in &list[..i] {
                if earlier.name == caller.name {
                    problems.push(format!("caller {:?} is named twice", caller.name));
                }
                if earlier.token_sha256.is_some() && earlier.token_sha256 == caller.token_sha256 {
                    problems.push(format!(
                        "callers {:?} and {:?} have the same token: each credential needs its own",
                        earlier.name, caller.name
                    ));
                }
            }
        }
        if !problems.is_empty() {
            return Err(CallersError(problems));
        }
        Ok(Callers {
            list: list.into_iter().map(Arc::new).collect(),
            from_file,
        })
    }

    /// The caller a credential belongs to. A bearer token: every caller's
    /// hash is compared, each in constant time, so the time taken tells
    /// nothing of the token. A signed-in person: the entry whose
    /// `oauth_subject` is the subject, else whose `oauth_email` is the
    /// verified email, with the rights both its `can` and the token's scopes
    /// hold; someone with no entry gets the unlisted rights (cut by the
    /// scopes), named by email or subject.
    pub fn identify(&self, credential: Credential<'_>) -> Option<Arc<Caller>> {
        match credential {
            Credential::Bearer(token) => {
                let sent: [u8; 32] = Sha256::digest(token.as_bytes()).into();
                let mut found = None;
                for caller in &self.list {
                    if let Some(hash) = &caller.token_sha256 {
                        if bool::from(hash.ct_eq(&sent)) {
                            found = Some(Arc::clone(caller));
                        }
                    }
                }
                found
            }
            Credential::SignedIn(who) => Some(Arc::new(self.signed_in(who))),
        }
    }

    fn signed_in(&self, who: &SignedIn) -> Caller {
        let by_subject = self
            .list
            .iter()
            .find(|c| c.oauth_subject.as_deref() == Some(who.subject.as_str()));
        let by_email = || {
            let email = who.email.as_deref()?;
            self.list.iter().find(|c| {
                c.oauth_email
                    .as_deref()
                    .is_some_and(|e| e.eq_ignore_ascii_case(email))
            })
        };
        if let Some(entry) = by_subject.or_else(by_email) {
            let mut caller = Caller::clone(entry);
            caller.withheld = caller.can.without(who.scopes);
            caller.can = caller.can.and(who.scopes);
            return caller;
        }
        let mut name = who.email.clone().unwrap_or_else(|| who.subject.clone());
        // Never a listed caller's name: that would be its sessions and proposals.
        if self.named(&name).is_some() {
            name = format!("oauth:{name}");
        }
        Caller {
            name,
            email: Some(
                who.email
                    .clone()
                    .unwrap_or_else(|| who.fallback_email.clone()),
            ),
            can: who.unlisted.and(who.scopes),
            paths: Prefixes::everything(),
            read_paths: Prefixes::everything(),
            self_review: false,
            withheld: who.unlisted.without(who.scopes),
            token_sha256: None,
            oauth_subject: Some(who.subject.clone()),
            oauth_email: None,
        }
    }

    /// The caller named `name` (`mirai call --as`).
    pub fn named(&self, name: &str) -> Option<Arc<Caller>> {
        self.list.iter().find(|c| c.name == name).cloned()
    }

    /// Every caller, in the file's order, then the shorthands.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Caller>> {
        self.list.iter()
    }

    /// Whether a credential is needed on the network: any token or a callers
    /// file but the reviewer's alone (which guards only decisions).
    pub fn guards_network(&self) -> bool {
        self.from_file || self.named(API_NAME).is_some()
    }
}

fn shorthand(name: &str, token: &str, review: bool) -> Caller {
    let mut can = Rights::all();
    if !review {
        can.remove(Right::Review);
    }
    Caller {
        name: name.to_string(),
        email: None,
        can,
        paths: Prefixes::everything(),
        read_paths: Prefixes::everything(),
        // The reviewer token decided its own writes before callers existed.
        self_review: review,
        withheld: Rights::none(),
        token_sha256: Some(Sha256::digest(token.as_bytes()).into()),
        oauth_subject: None,
        oauth_email: None,
    }
}

/// The live set, swapped whole on reload: a request holds the set it
/// started with, so none is dropped or sees half a file.
pub struct CallerBook {
    file: Option<PathBuf>,
    api_token: Option<String>,
    reviewer_token: Option<String>,
    current: RwLock<Arc<Callers>>,
}

impl CallerBook {
    /// Loads the set once (start-up): `file` when set, and the shorthands.
    pub fn open(
        file: Option<&Path>,
        api_token: Option<&str>,
        reviewer_token: Option<&str>,
    ) -> Result<CallerBook, CallersError> {
        let book = CallerBook {
            file: file.map(Path::to_path_buf),
            api_token: api_token.map(str::to_string),
            reviewer_token: reviewer_token.map(str::to_string),
            current: RwLock::new(Arc::new(Callers::default())),
        };
        let callers = book.read()?;
        *book.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(callers);
        Ok(book)
    }

    fn read(&self) -> Result<Callers, CallersError> {
        let file = match &self.file {
            Some(path) => load(path)?,
            None => Vec::new(),
        };
        Callers::new(
            file,
            self.file.is_some(),
            self.api_token.as_deref(),
            self.reviewer_token.as_deref(),
        )
    }

    /// The set now.
    pub fn current(&self) -> Arc<Callers> {
        Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Reads the file again; a file with problems keeps the set as it was
    /// and answers the problems. Answers how many callers the new set holds.
    pub fn reload(&self) -> Result<usize, CallersError> {
        let callers = self.read()?;
        let count = callers.list.len();
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(callers);
        Ok(count)
    }

    /// The file, when one is set.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(token: &str) -> String {
        Sha256::digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[test]
    fn a_token_finds_its_caller_and_no_other() {
        let text = format!(
            "[[caller]]\nname = \"ann\"\nemail = \"ann@example.org\"\ntoken_sha256 = \"{}\"\ncan = [\"read\"]\n",
            hash("ann-token")
        );
        let file = parse(&text).unwrap();
        let callers = Callers::new(file, true, Some("api-token"), None).unwrap();
        let ann = callers.identify(Credential::Bearer("ann-token")).unwrap();
        assert_eq!(ann.name, "ann");
        assert!(ann.authors_commits());
        let api = callers.identify(Credential::Bearer("api-token")).unwrap();
        assert_eq!(api.name, API_NAME);
        assert!(!api.can.has(Right::Review));
        assert!(callers.identify(Credential::Bearer("ann-tokeN")).is_none());
        assert!(callers.guards_network());
    }

    #[test]
    fn a_token_or_name_used_twice_is_refused() {
        let text = format!(
            "[[caller]]\nname = \"api\"\nemail = \"a@b\"\ntoken_sha256 = \"{}\"\ncan = [\"read\"]\n",
            hash("t")
        );
        let err = Callers::new(parse(&text).unwrap(), true, Some("t"), None).unwrap_err();
        assert_eq!(err.0.len(), 2, "{err}");
    }

    fn signed_in(subject: &str, email: Option<&str>, scopes: &[Right]) -> SignedIn {
        let mut rights = Rights::none();
        for right in scopes {
            rights.add(*right);
        }
        let mut unlisted = Rights::none();
        unlisted.add(Right::Read);
        SignedIn {
            subject: subject.to_string(),
            email: email.map(str::to_string),
            scopes: rights,
            unlisted,
            fallback_email: format!("{subject}@id.example"),
        }
    }

    #[test]
    fn a_signed_in_person_is_their_entry_with_rights_cut_by_the_scopes() {
        let text = "[[caller]]\nname = \"ann\"\noauth_subject = \"s-ann\"\ncan = [\"read\", \"write\"]\npaths = [\"inbox/\"]\n\
                    [[caller]]\nname = \"bea\"\noauth_email = \"bea@example.org\"\ncan = [\"read\"]\n";
        let callers = Callers::new(parse(text).unwrap(), true, Some("api"), None).unwrap();
        let ann = callers
            .identify(Credential::SignedIn(&signed_in(
                "s-ann",
                None,
                &[Right::Read, Right::Review],
            )))
            .unwrap();
        assert_eq!(ann.name, "ann");
        assert_eq!(ann.can.names(), ["read"]);
        assert!(ann.paths.holds("inbox/a.md") && !ann.paths.holds("b.md"));
        let bea = callers
            .identify(Credential::SignedIn(&signed_in(
                "s-x",
                Some("BEA@example.org"),
                &Right::ALL,
            )))
            .unwrap();
        assert_eq!((bea.name.as_str(), bea.can.names()), ("bea", vec!["read"]));
        // Unlisted: the default rights, cut by the scopes; never a listed name.
        let zed = callers
            .identify(Credential::SignedIn(&signed_in(
                "s-zed",
                None,
                &[Right::Write],
            )))
            .unwrap();
        assert_eq!(zed.name, "s-zed");
        assert_eq!(zed.email.as_deref(), Some("s-zed@id.example"));
        assert!(zed.can.names().is_empty());
        let posing = callers
            .identify(Credential::SignedIn(&signed_in(
                "ann",
                None,
                &[Right::Read],
            )))
            .unwrap();
        assert_eq!(posing.name, "oauth:ann");
        assert_eq!(posing.can.names(), ["read"]);
        // A caller who only signs in has no token to match.
        assert!(callers.identify(Credential::Bearer("")).is_none());
    }

    #[test]
    fn the_reviewer_token_alone_does_not_guard_the_network() {
        let callers = Callers::new(Vec::new(), false, None, Some("r")).unwrap();
        assert!(!callers.guards_network());
        assert!(callers.named(REVIEWER_NAME).unwrap().can.has(Right::Review));
    }
}
