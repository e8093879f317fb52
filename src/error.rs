//! The error vocabulary: every failure a caller can see is one of these codes,
//! with a fixed HTTP status and a message a person (or a model) can act on.
//!
//! Adapters render an [`Error`] the same way everywhere:
//! `{"error":{"code":"...","message":"..."}}`.

use serde::Serialize;

/// A stable, machine-readable error code. The string form is part of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    InvalidPath,
    InvalidExtension,
    InvalidPatch,
    InvalidQuery,
    InvalidLimit,
    InvalidRequest,
    Unauthorized,
    /// A browser's request from a foreign `Origin`, or, without a token, for a foreign `Host`.
    OriginRefused,
    PolicyDenied,
    NotFound,
    MethodNotAllowed,
    Conflict,
    PayloadTooLarge,
    /// A POST body sent without `Content-Type: application/json` (a browser's
    /// simple request that no preflight guards).
    UnsupportedMediaType,
    /// A note larger than `MIRAI_MAX_NOTE_BYTES`: never read, indexed or written by mirai.
    NoteTooLarge,
    /// A write a guard refused: it would wipe much of a note, or it adds an
    /// elision placeholder instead of content (`MIRAI_GUARDS`).
    GuardRefused,
    /// Review mode: as many proposals are pending as `MIRAI_PROPOSALS_MAX_PENDING` allows.
    TooManyProposals,
    /// As many change streams are open as `MIRAI_EVENTS_MAX_CLIENTS` allows.
    TooManyStreams,
    /// The request body did not arrive in time (`MIRAI_BODY_TIMEOUT_MS`).
    RequestTimeout,
    GitError,
    InvalidIndexArtifact,
    LlmUnavailable,
    /// The git remote could not be reached (or refused mirai's credentials); nothing changed locally.
    RemoteUnavailable,
    Internal,
    /// The disk holding the notes (or the user's quota) is full: the write was not made.
    InsufficientStorage,
    /// The model's answer followed neither `<code>` nor `<reply>`.
    ProtocolError,
    /// A sandboxed program passed its wall-clock deadline or its CPU bound.
    SandboxTimeout,
    /// A sandboxed program ran out of memory.
    SandboxMemory,
    /// A sandboxed program made more host calls than allowed.
    SandboxCallLimit,
    /// A sandboxed program's console output and result passed the output cap.
    SandboxOutputLimit,
    /// A sandboxed program threw, trapped, or returned what is not JSON.
    SandboxError,
}

impl ErrorCode {
    /// The code as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidPath => "invalid_path",
            ErrorCode::InvalidExtension => "invalid_extension",
            ErrorCode::InvalidPatch => "invalid_patch",
            ErrorCode::InvalidQuery => "invalid_query",
            ErrorCode::InvalidLimit => "invalid_limit",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::OriginRefused => "origin_refused",
            ErrorCode::PolicyDenied => "policy_denied",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::Conflict => "conflict",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::NoteTooLarge => "note_too_large",
            ErrorCode::GuardRefused => "guard_refused",
            ErrorCode::TooManyProposals => "too_many_proposals",
            ErrorCode::TooManyStreams => "too_many_streams",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::GitError => "git_error",
            ErrorCode::InvalidIndexArtifact => "invalid_index_artifact",
            ErrorCode::LlmUnavailable => "llm_unavailable",
            ErrorCode::RemoteUnavailable => "remote_unavailable",
            ErrorCode::Internal => "internal",
            ErrorCode::InsufficientStorage => "insufficient_storage",
            ErrorCode::ProtocolError => "protocol_error",
            ErrorCode::SandboxTimeout => "sandbox_timeout",
            ErrorCode::SandboxMemory => "sandbox_memory",
            ErrorCode::SandboxCallLimit => "sandbox_call_limit",
            ErrorCode::SandboxOutputLimit => "sandbox_output_limit",
            ErrorCode::SandboxError => "sandbox_error",
        }
    }

    /// Every code, for lookups by wire name.
    pub const ALL: [ErrorCode; 31] = [
        ErrorCode::InvalidPath,
        ErrorCode::InvalidExtension,
        ErrorCode::InvalidPatch,
        ErrorCode::InvalidQuery,
        ErrorCode::InvalidLimit,
        ErrorCode::InvalidRequest,
        ErrorCode::Unauthorized,
        ErrorCode::OriginRefused,
        ErrorCode::PolicyDenied,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::Conflict,
        ErrorCode::PayloadTooLarge,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::NoteTooLarge,
        ErrorCode::GuardRefused,
        ErrorCode::TooManyProposals,
        ErrorCode::TooManyStreams,
        ErrorCode::RequestTimeout,
        ErrorCode::GitError,
        ErrorCode::InvalidIndexArtifact,
        ErrorCode::LlmUnavailable,
        ErrorCode::RemoteUnavailable,
        ErrorCode::Internal,
        ErrorCode::InsufficientStorage,
        ErrorCode::ProtocolError,
        ErrorCode::SandboxTimeout,
        ErrorCode::SandboxMemory,
        ErrorCode::SandboxCallLimit,
        ErrorCode::SandboxOutputLimit,
        ErrorCode::SandboxError,
    ];

    /// The code with wire name `name`.
    pub fn from_wire(name: &str) -> Option<ErrorCode> {
        ErrorCode::ALL
            .into_iter()
            .find(|code| code.as_str() == name)
    }

    /// The HTTP status this code is answered with.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::InvalidPath
            | ErrorCode::InvalidExtension
            | ErrorCode::InvalidPatch
            | ErrorCode::InvalidQuery
            | ErrorCode::InvalidLimit
            | ErrorCode::InvalidRequest => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::PolicyDenied | ErrorCode::OriginRefused => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::RequestTimeout => 408,
            ErrorCode::Conflict => 409,
            ErrorCode::PayloadTooLarge | ErrorCode::NoteTooLarge => 413,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::GuardRefused => 422,
            ErrorCode::TooManyProposals => 429,
            ErrorCode::GitError | ErrorCode::InvalidIndexArtifact | ErrorCode::Internal => 500,
            ErrorCode::LlmUnavailable
            | ErrorCode::RemoteUnavailable
            | ErrorCode::TooManyStreams => 503,
            ErrorCode::InsufficientStorage => 507,
            // A program's or a model's failure is reported inside a 200 answer
            // (docs/src/sandbox.md, docs/src/agent.md); these statuses apply
            // only where an adapter must pick one.
            ErrorCode::SandboxTimeout => 408,
            ErrorCode::SandboxOutputLimit => 413,
            ErrorCode::ProtocolError
            | ErrorCode::SandboxMemory
            | ErrorCode::SandboxCallLimit
            | ErrorCode::SandboxError => 422,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure with its code and a human-readable message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[error("{code}: {message}")]
pub struct Error {
    pub code: ErrorCode,
    pub message: String,
    /// What the error is about, for code that acts on it (adding hints, say):
    /// code reads this, never the message. Not part of the wire shape.
    #[serde(skip)]
    pub detail: Option<Box<Detail>>,
}

/// Typed facts an error carries besides its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detail {
    /// A note that is not there (`notes::suggest` renders the message from it).
    MissingNote(MissingNote),
}

/// A missing note, and the hints gathered for the caller so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MissingNote {
    /// The path asked for, relative to the notes root.
    pub path: String,
    /// The notes with a close name, best first; `None` until someone looked.
    pub closest: Option<Vec<String>>,
    /// Notes whose text holds the name's words, when none has a close name.
    pub holding: Vec<String>,
    /// Whether the request could have created the note (`create: true`).
    pub creatable: bool,
}

impl Error {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
            detail: None,
        }
    }

    /// This error, carrying `detail`.
    pub fn with_detail(mut self, detail: Detail) -> Self {
        self.detail = Some(Box::new(detail));
        self
    }

    pub fn invalid_path(message: impl Into<String>) -> Self {
        Error::new(ErrorCode::InvalidPath, message)
    }

    pub fn invalid_extension(message: impl Into<String>) -> Self {
        Error::new(ErrorCode::InvalidExtension, message)
    }

    pub fn invalid_patch(message: impl Into<String>) -> Self {
        Error::new(ErrorCode::InvalidPatch, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Error::new(ErrorCode::NotFound, message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Error::new(ErrorCode::Conflict, message)
    }

    pub fn git(message: impl Into<String>) -> Self {
        Error::new(ErrorCode::GitError, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Error::new(ErrorCode::Internal, message)
    }

    /// The one error shape every adapter answers with (HTTP bodies, server-sent
    /// events, the sandbox's answer to the guest): `{"error":{"code","message"}}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "error": self })
    }
}

/// Shorthand used across the domain.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_wire_name() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_wire(code.as_str()), Some(code));
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
        }
        assert_eq!(ErrorCode::from_wire("nope"), None);
    }

    #[test]
    fn an_error_renders_as_the_one_error_shape() {
        let err = Error::not_found("note not found: \"a.md\"");
        assert_eq!(
            err.to_json(),
            serde_json::json!({"error": {"code": "not_found", "message": "note not found: \"a.md\""}})
        );
    }
}
