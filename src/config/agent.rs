//! The agent's settings: where its model is (`MIRAI_LLM_*`, the key also from
//! `OPENAI_API_KEY`) and the bounds on one run (`MIRAI_AGENT_*`).

use super::error::ConfigError;
use super::read::{as_usize, Env};
use super::settings::Config;
use crate::agent::MAX_AGENT_STEPS;

pub(super) fn read(env: Env, config: &mut Config) -> Result<(), ConfigError> {
    let llm = &mut config.llm;
    if let Some(url) = env.non_empty("MIRAI_LLM_BASE_URL") {
        llm.base_url = url.trim().trim_end_matches('/').to_string();
    }
    if let Some(model) = env.trimmed("MIRAI_LLM_MODEL") {
        llm.model = model;
    }
    llm.api_key = env
        .trimmed("MIRAI_LLM_API_KEY")
        .or_else(|| env.trimmed("OPENAI_API_KEY"));
    if let Some(n) = env.positive("MIRAI_LLM_TIMEOUT_MS", "a positive number of milliseconds")? {
        llm.timeout_ms = n;
    }
    let retries = "a number of retries from 0 to 10";
    if let Some(n) = env.number_in("MIRAI_LLM_MAX_RETRIES", 0..=10, retries)? {
        llm.max_retries = n as u32;
    }
    let tokens = "a number of tokens from 64 to 32768";
    if let Some(n) = env.positive_in("MIRAI_LLM_MAX_TOKENS", 64..=32768, tokens)? {
        llm.max_tokens = n as u32;
    }
    let steps = "a number of steps from 1 to 32";
    let most = MAX_AGENT_STEPS as u64;
    if let Some(n) = env.positive_in("MIRAI_AGENT_MAX_STEPS", 1..=most, steps)? {
        config.agent.default_steps = as_usize(n);
    }
    if let Some(n) = env.positive(
        "MIRAI_AGENT_DEADLINE_MS",
        "a positive number of milliseconds",
    )? {
        config.agent.deadline_ms = n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::read::env_of;
    use crate::config::settings::Config;

    #[test]
    fn the_llm_key_comes_from_either_variable_and_is_never_printed() {
        let c = Config::new("n")
            .with_environment(&env_of(&[("OPENAI_API_KEY", "sk-secret")]))
            .unwrap();
        assert_eq!(c.llm.api_key.as_deref(), Some("sk-secret"));
        assert!(c.llm.is_configured());
        assert!(!format!("{c:?}").contains("sk-secret"));
        let c = Config::new("n")
            .with_environment(&env_of(&[
                ("MIRAI_LLM_API_KEY", "mine"),
                ("OPENAI_API_KEY", "theirs"),
            ]))
            .unwrap();
        assert_eq!(c.llm.api_key.as_deref(), Some("mine"));
        let c = Config::new("n").with_environment(&env_of(&[])).unwrap();
        assert!(!c.llm.is_configured());
        let c = Config::new("n")
            .with_environment(&env_of(&[(
                "MIRAI_LLM_BASE_URL",
                "http://127.0.0.1:11434/v1/",
            )]))
            .unwrap();
        assert_eq!(c.llm.base_url, "http://127.0.0.1:11434/v1");
        assert!(c.llm.is_configured(), "a local server needs no key");
    }

    #[test]
    fn agent_steps_are_bounded() {
        for bad in ["0", "33", "many"] {
            let pairs: &'static [(&str, &str)] =
                Box::leak(Box::new([("MIRAI_AGENT_MAX_STEPS", bad)]));
            assert!(
                Config::new("n").with_environment(&env_of(pairs)).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn llm_answers_are_bounded_from_64_to_32768_tokens() {
        assert_eq!(Config::new("n").llm.max_tokens, 1024);
        for bad in ["0", "63", "32769", "lots"] {
            let pairs: &'static [(&str, &str)] =
                Box::leak(Box::new([("MIRAI_LLM_MAX_TOKENS", bad)]));
            let err = Config::new("n")
                .with_environment(&env_of(pairs))
                .unwrap_err();
            assert!(err.to_string().contains("MIRAI_LLM_MAX_TOKENS"), "{bad}");
        }
        let config = Config::new("n")
            .with_environment(&env_of(&[("MIRAI_LLM_MAX_TOKENS", "512")]))
            .unwrap();
        assert_eq!(config.llm.max_tokens, 512);
    }

    #[test]
    fn credentials_in_the_model_url_never_reach_debug_output() {
        let c = Config::new("n")
            .with_environment(&env_of(&[(
                "MIRAI_LLM_BASE_URL",
                "http://alice:hunter2@llm.internal:8000/v1",
            )]))
            .unwrap();
        assert_eq!(c.llm.base_url, "http://alice:hunter2@llm.internal:8000/v1");
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("alice"),
            "{shown}"
        );
        assert!(shown.contains("http://***@llm.internal:8000/v1"), "{shown}");
    }
}
