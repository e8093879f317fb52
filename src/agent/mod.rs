//! The agent: think -> code -> observe against an OpenAI-compatible model.
//!
//! The model writes JavaScript; the sandbox runs it; the outcome goes back as
//! the next message, until the model replies or a bound stops the run. The
//! agent never calls an operation for the model: the model's code, in the
//! sandbox, is the only actor (ARCHITECTURE.md, "The model's code is the only
//! actor").

mod hints;
pub mod llm;
pub mod outcome;
pub mod prompt;
pub mod protocol;
mod run;
mod settings;
mod suggest;
pub mod transcript;
pub mod warnings;

pub use run::{RunReport, RunRequest, Step, Stopped, Usage};
pub use settings::{AgentLimits, LlmConfig, DEFAULT_LLM_BASE_URL, MAX_AGENT_STEPS};

use std::path::Path;
use std::sync::Arc;

use crate::redact::Secrets;
use crate::sandbox::Sandbox;
use llm::Llm;

/// Most bytes of a result, of console output and of an error message that
/// one observation shows the model; longer ones are cut, keeping JSON valid.
pub const OBSERVATION_CAP: usize = 4096;

/// Everything a run needs besides the notes' context.
pub struct Agent {
    llm: Llm,
    sandbox: Arc<Sandbox>,
    limits: AgentLimits,
    runs: transcript::Runs,
}

impl Agent {
    /// An agent asking the model `llm` for code that `sandbox` runs, within
    /// `limits`; its transcripts are kept under `notes_root`.
    pub fn new(
        llm: LlmConfig,
        limits: AgentLimits,
        secrets: Secrets,
        notes_root: &Path,
        sandbox: Arc<Sandbox>,
    ) -> Agent {
        Agent {
            llm: Llm::new(llm, secrets),
            sandbox,
            limits,
            runs: transcript::Runs::new(notes_root),
        }
    }

    pub fn runs(&self) -> &transcript::Runs {
        &self.runs
    }
}
