//! The embeddings' settings (`MIRAI_EMBED_*`): none without
//! `MIRAI_EMBED_BASE_URL`, and then search is lexical only.

use super::error::ConfigError;
use super::read::Env;
use super::settings::Config;
use crate::embed::EmbedConfig;

pub(super) fn read(env: Env, config: &mut Config) -> Result<(), ConfigError> {
    let Some(base) = env.non_empty("MIRAI_EMBED_BASE_URL") else {
        config.embed = None;
        return Ok(());
    };
    let mut c = EmbedConfig::new(&base);
    if let Some(model) = env.trimmed("MIRAI_EMBED_MODEL") {
        c.model = model;
    }
    c.api_key = env.trimmed("MIRAI_EMBED_API_KEY");
    let batch = "a number of chunks from 1 to 2048";
    if let Some(n) = env.number_in("MIRAI_EMBED_BATCH", 1..=2048, batch)? {
        c.batch = n as usize;
    }
    let ms = "a positive number of milliseconds";
    if let Some(n) = env.number_in("MIRAI_EMBED_TIMEOUT_MS", 1..=u64::MAX, ms)? {
        c.timeout_ms = n;
    }
    if let Some(n) = env.number_in("MIRAI_EMBED_QUERY_TIMEOUT_MS", 1..=u64::MAX, ms)? {
        c.query_timeout_ms = n;
    }
    let retries = "a number of retries from 0 to 10";
    if let Some(n) = env.number_in("MIRAI_EMBED_MAX_RETRIES", 0..=10, retries)? {
        c.max_retries = n as u32;
    }
    if let Some(on) = env.switch("MIRAI_EMBED_INPUT_TYPE")? {
        c.input_type = on;
    }
    // Prefixes keep their spaces ("query: "): only unset means none.
    c.query_prefix = env.raw("MIRAI_EMBED_QUERY_PREFIX").unwrap_or_default();
    c.passage_prefix = env.raw("MIRAI_EMBED_PASSAGE_PREFIX").unwrap_or_default();
    config.embed = Some(c);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::read::env_of;
    use crate::config::settings::Config;

    #[test]
    fn embedding_settings() {
        assert_eq!(
            Config::new("n")
                .with_environment(&env_of(&[]))
                .unwrap()
                .embed,
            None
        );
        let c = Config::new("n")
            .with_environment(&env_of(&[
                (
                    "MIRAI_EMBED_BASE_URL",
                    "https://u:pw-s3cret@embed.example/v1/",
                ),
                ("MIRAI_EMBED_MODEL", "e5-small"),
                ("MIRAI_EMBED_API_KEY", "ek-s3cret"),
                ("MIRAI_EMBED_BATCH", "8"),
                ("MIRAI_EMBED_INPUT_TYPE", "ON"),
                ("MIRAI_EMBED_QUERY_PREFIX", "query: "),
                ("MIRAI_EMBED_QUERY_TIMEOUT_MS", "250"),
            ]))
            .unwrap();
        let e = c.embed.clone().unwrap();
        assert_eq!(e.base_url, "https://u:pw-s3cret@embed.example/v1");
        assert_eq!(
            (e.model.as_str(), e.batch, e.input_type),
            ("e5-small", 8, true)
        );
        assert_eq!(
            (e.query_prefix.as_str(), e.passage_prefix.as_str()),
            ("query: ", "")
        );
        assert_eq!((e.query_timeout_ms, e.timeout_ms), (250, 60_000));
        assert_eq!(e.api_key.as_deref(), Some("ek-s3cret"));
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("s3cret") && shown.contains("embed.example/v1"),
            "{shown}"
        );
        for (name, value) in [
            ("MIRAI_EMBED_INPUT_TYPE", "yes"),
            ("MIRAI_EMBED_BATCH", "0"),
            ("MIRAI_EMBED_QUERY_TIMEOUT_MS", "soon"),
        ] {
            let pairs: &'static [(&'static str, &'static str)] = Box::leak(Box::new([
                ("MIRAI_EMBED_BASE_URL", "http://127.0.0.1:1/v1"),
                (name, value),
            ]));
            let err = Config::new("n")
                .with_environment(&env_of(pairs))
                .unwrap_err();
            assert!(err.to_string().contains(name), "{err}");
        }
    }
}
