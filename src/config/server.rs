//! What the HTTP and MCP adapters serve with besides the policy: the browser
//! origins and `Host` names they accept, the size of an MCP tool result, and
//! the change stream's limits.

use super::error::ConfigError;
use super::read::{as_usize, invalid, Env};
use super::settings::Config;
use crate::events::MAX_EVENTS_BACKLOG;

pub(super) fn read(env: Env, config: &mut Config) -> Result<(), ConfigError> {
    const BACKLOG: &str = "a number of events from 1 to 100000";
    if let Some(n) = env.positive("MIRAI_EVENTS_BACKLOG", BACKLOG)? {
        if n > MAX_EVENTS_BACKLOG {
            return Err(invalid("MIRAI_EVENTS_BACKLOG", n.to_string(), BACKLOG));
        }
        config.events.backlog = as_usize(n);
    }
    if let Some(n) = env.positive("MIRAI_EVENTS_MAX_CLIENTS", "a positive number of streams")? {
        config.events.max_clients = as_usize(n);
    }
    if let Some(n) = env.positive(
        "MIRAI_MCP_MAX_SUBSCRIPTIONS",
        "a positive number of subscriptions",
    )? {
        config.events.mcp_max_subscriptions = as_usize(n);
    }
    if let Some(n) = env.positive("MIRAI_MCP_MAX_RESULT_BYTES", "a positive number of bytes")? {
        config.mcp_max_result_bytes = as_usize(n);
    }
    let origins = match env.non_empty("MIRAI_ALLOWED_ORIGINS") {
        Some(origins) => Some(("MIRAI_ALLOWED_ORIGINS", origins)),
        None => env
            .non_empty("MIRAI_MCP_ALLOWED_ORIGINS")
            .map(|o| ("MIRAI_MCP_ALLOWED_ORIGINS", o)),
    };
    if let Some((name, origins)) = origins {
        config.allowed_origins = crate::origin::parse_origins(&origins).map_err(|entry| {
            invalid(
                name,
                entry,
                "comma-separated origins such as https://notes.example or http://host:8080, without paths or wildcards",
            )
        })?;
    }
    if let Some(hosts) = env.non_empty("MIRAI_ALLOWED_HOSTS") {
        config.allowed_hosts = crate::origin::parse_hosts(&hosts).map_err(|entry| {
            invalid(
                "MIRAI_ALLOWED_HOSTS",
                entry,
                "comma-separated host names or addresses such as notes.example or 10.0.0.5, without schemes or paths",
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::read::env_of;
    use crate::config::settings::Config;

    #[test]
    fn allowed_origins_and_hosts_are_normalized_and_a_bad_entry_named() {
        let c = Config::new("n")
            .with_environment(&env_of(&[
                (
                    "MIRAI_ALLOWED_ORIGINS",
                    "https://Notes.Example/, http://a.example:8080",
                ),
                ("MIRAI_MCP_ALLOWED_ORIGINS", "http://ignored.example"),
                ("MIRAI_ALLOWED_HOSTS", "Notes.Example:443,10.0.0.5"),
            ]))
            .unwrap();
        assert_eq!(
            c.allowed_origins,
            ["https://notes.example", "http://a.example:8080"]
        );
        assert_eq!(c.allowed_hosts, ["notes.example", "10.0.0.5"]);
        let c = Config::new("n")
            .with_environment(&env_of(&[(
                "MIRAI_MCP_ALLOWED_ORIGINS",
                "http://old.example",
            )]))
            .unwrap();
        assert_eq!(
            c.allowed_origins,
            ["http://old.example"],
            "the old name is an alias"
        );
        for (name, bad, entry) in [
            ("MIRAI_ALLOWED_ORIGINS", "https://ok.example,*", "*"),
            (
                "MIRAI_ALLOWED_ORIGINS",
                "https://ok.example/app",
                "https://ok.example/app",
            ),
            ("MIRAI_MCP_ALLOWED_ORIGINS", "null", "null"),
            (
                "MIRAI_ALLOWED_HOSTS",
                "ok.example,http://x.example",
                "http://x.example",
            ),
        ] {
            let pairs: &'static [(&str, &str)] = Box::leak(Box::new([(name, bad)]));
            let err = Config::new("n")
                .with_environment(&env_of(pairs))
                .unwrap_err();
            let line = err.to_string();
            assert!(
                line.starts_with(&format!("invalid {name}: {entry} (")),
                "{line}"
            );
            assert!(!line.contains('\n'), "{line}");
        }
    }
}
