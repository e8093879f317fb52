//! The write guards' settings: what a write does to a note with uncommitted
//! changes (`MIRAI_DIRTY_NOTES`) and the guards against destructive writes
//! (`MIRAI_GUARD*`).

use super::error::ConfigError;
use super::read::{as_usize, invalid, Env};
use super::settings::Config;
use crate::ops::{DirtyNotes, GuardMode};

pub(super) fn read(env: Env, config: &mut Config) -> Result<(), ConfigError> {
    let dirty = [
        ("refuse", DirtyNotes::Refuse),
        ("snapshot", DirtyNotes::Snapshot),
    ];
    if let Some(mode) = env.choice("MIRAI_DIRTY_NOTES", &dirty, "refuse or snapshot")? {
        config.dirty_notes = mode;
    }
    let modes = [
        ("models", GuardMode::Models),
        ("all", GuardMode::All),
        ("off", GuardMode::Off),
    ];
    if let Some(mode) = env.choice("MIRAI_GUARDS", &modes, "models, all or off")? {
        config.guards.mode = mode;
    }
    if let Some(raw) = env.non_empty("MIRAI_GUARD_MAX_DELETE_RATIO") {
        config.guards.max_delete_ratio = match raw.trim().parse::<f64>() {
            Ok(r) if r > 0.0 && r <= 1.0 => r,
            _ => {
                return Err(invalid(
                    "MIRAI_GUARD_MAX_DELETE_RATIO",
                    raw,
                    "a share of a note's lines above 0 and at most 1, such as 0.5",
                ))
            }
        };
    }
    if let Some(on) = env.switch("MIRAI_GUARD_PLACEHOLDERS")? {
        config.guards.placeholders = on;
    }
    if let Some(on) = env.switch("MIRAI_GUARD_STRUCTURE")? {
        config.guards.structure = on;
    }
    if let Some(n) = env.positive("MIRAI_GUARD_MIN_LINES", "a positive number of lines")? {
        config.guards.min_lines = as_usize(n);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::read::env_of;
    use crate::config::settings::Config;
    use crate::ops::{GuardMode, Guards};

    #[test]
    fn guards_default_to_models_and_refuse_other_values() {
        let c = Config::new("n").with_environment(&env_of(&[])).unwrap();
        assert_eq!(c.guards, Guards::default());
        assert_eq!(c.guards.mode, GuardMode::Models);
        let c = Config::new("n")
            .with_environment(&env_of(&[
                ("MIRAI_GUARDS", " ALL "),
                ("MIRAI_GUARD_MAX_DELETE_RATIO", "0.8"),
                ("MIRAI_GUARD_MIN_LINES", "5"),
                ("MIRAI_GUARD_PLACEHOLDERS", "off"),
                ("MIRAI_GUARD_STRUCTURE", "off"),
            ]))
            .unwrap();
        assert_eq!(
            c.guards,
            Guards {
                mode: GuardMode::All,
                max_delete_ratio: 0.8,
                min_lines: 5,
                placeholders: false,
                structure: false,
            }
        );
        for (name, bad) in [
            ("MIRAI_GUARDS", "some"),
            ("MIRAI_GUARD_MAX_DELETE_RATIO", "0"),
            ("MIRAI_GUARD_MAX_DELETE_RATIO", "1.5"),
            ("MIRAI_GUARD_MAX_DELETE_RATIO", "half"),
            ("MIRAI_GUARD_MIN_LINES", "0"),
            ("MIRAI_GUARD_PLACEHOLDERS", "no"),
            ("MIRAI_GUARD_STRUCTURE", "maybe"),
        ] {
            let pairs: &'static [(&str, &str)] = Box::leak(Box::new([(name, bad)]));
            let err = Config::new("n")
                .with_environment(&env_of(pairs))
                .unwrap_err();
            assert!(
                err.to_string()
                    .starts_with(&format!("invalid {name}: {bad} (")),
                "{err}"
            );
        }
    }
}
