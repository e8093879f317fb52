//! The bounds on requests and writes: body size and time, note and pulled
//! file size, and how
//! much one edit, multi-note commit or move may change.

use super::error::ConfigError;
use super::read::{as_usize, Env};
use super::settings::Config;

/// The highest `MIRAI_CHANGES_MAX_PATCHES` (and `MIRAI_MOVE_MAX_NOTES`) accepted: one commit's crash record
/// names every note, and stays well within what recovery reads.
pub const MAX_CHANGES_LIMIT: u64 = 10_000;

pub(super) fn read(env: Env, config: &mut Config) -> Result<(), ConfigError> {
    if let Some(n) = env.positive("MIRAI_MAX_BODY_BYTES", "a positive number of bytes")? {
        config.max_body_bytes = as_usize(n);
    }
    if let Some(n) = env.positive("MIRAI_MAX_NOTE_BYTES", "a positive number of bytes")? {
        config.max_note_bytes = as_usize(n);
    }
    if config.max_note_bytes < config.max_body_bytes {
        return Err(ConfigError::Value {
            name: "MIRAI_MAX_NOTE_BYTES",
            value: format!(
                "{} (below MIRAI_MAX_BODY_BYTES, {})",
                config.max_note_bytes, config.max_body_bytes
            ),
            expected: "at least MIRAI_MAX_BODY_BYTES: a note must hold what one request may write",
        });
    }
    match env.positive("MIRAI_MAX_FILE_BYTES", "a positive number of bytes")? {
        Some(n) => config.max_file_bytes = as_usize(n),
        // Unset, it follows a note limit raised past its default.
        None => config.max_file_bytes = config.max_file_bytes.max(config.max_note_bytes),
    }
    if config.max_file_bytes < config.max_note_bytes {
        return Err(ConfigError::Value {
            name: "MIRAI_MAX_FILE_BYTES",
            value: format!(
                "{} (below MIRAI_MAX_NOTE_BYTES, {})",
                config.max_file_bytes, config.max_note_bytes
            ),
            expected:
                "at least MIRAI_MAX_NOTE_BYTES: a pull must bring back every note mirai may write",
        });
    }
    if let Some(on) = env.switch("MIRAI_FILES_ANY_TYPE")? {
        config.files_any_type = on;
    }
    if let Some(n) = env.positive("MIRAI_BODY_TIMEOUT_MS", "a positive number of milliseconds")? {
        config.body_timeout_ms = n;
    }
    if let Some(n) = env.positive("MIRAI_EDIT_MAX_EDITS", "a positive number of edits")? {
        config.max_edits = as_usize(n);
    }
    let changes = "a number of patches from 1 to 10000";
    if let Some(n) = env.positive_in("MIRAI_CHANGES_MAX_PATCHES", 1..=MAX_CHANGES_LIMIT, changes)? {
        config.max_changes = as_usize(n);
    }
    let moves = "a number of notes from 1 to 10000";
    if let Some(n) = env.positive_in("MIRAI_MOVE_MAX_NOTES", 1..=MAX_CHANGES_LIMIT, moves)? {
        config.max_move_notes = as_usize(n);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::read::env_of;
    use crate::config::settings::Config;

    #[test]
    fn body_limit_must_be_a_positive_number() {
        for bad in ["0", "-1", "1MB", "1.5"] {
            let pairs: &'static [(&str, &str)] =
                Box::leak(Box::new([("MIRAI_MAX_BODY_BYTES", bad)]));
            assert!(
                Config::new("n").with_environment(&env_of(pairs)).is_err(),
                "{bad}"
            );
        }
        let c = Config::new("n")
            .with_environment(&env_of(&[("MIRAI_MAX_BODY_BYTES", "2048")]))
            .unwrap();
        assert_eq!(c.max_body_bytes, 2048);
    }

    #[test]
    fn the_file_limit_is_64_mib_never_below_the_note_limit_and_follows_it_when_unset() {
        assert_eq!(Config::new("n").max_file_bytes, 64 * 1024 * 1024);
        let c = Config::new("n")
            .with_environment(&env_of(&[("MIRAI_MAX_NOTE_BYTES", "100000000")]))
            .unwrap();
        assert_eq!(c.max_file_bytes, 100_000_000);
        let err = Config::new("n")
            .with_environment(&env_of(&[
                ("MIRAI_MAX_NOTE_BYTES", "20000000"),
                ("MIRAI_MAX_FILE_BYTES", "10000000"),
            ]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("MIRAI_MAX_FILE_BYTES") && err.contains("MIRAI_MAX_NOTE_BYTES"),
            "{err}"
        );
    }

    #[test]
    fn the_note_limit_is_8_mib_and_never_below_the_body_limit() {
        assert_eq!(Config::new("n").max_note_bytes, 8 * 1024 * 1024);
        let c = Config::new("n")
            .with_environment(&env_of(&[("MIRAI_MAX_NOTE_BYTES", "2000000")]))
            .unwrap();
        assert_eq!(c.max_note_bytes, 2_000_000);
        let err = Config::new("n")
            .with_environment(&env_of(&[("MIRAI_MAX_NOTE_BYTES", "1000")]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("MIRAI_MAX_NOTE_BYTES") && err.contains("MIRAI_MAX_BODY_BYTES"),
            "{err}"
        );
        let err = Config::new("n")
            .with_environment(&env_of(&[("MIRAI_MAX_BODY_BYTES", "9000000")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("below MIRAI_MAX_BODY_BYTES"), "{err}");
    }

    #[test]
    fn changes_max_patches_is_a_number_from_1_to_10000() {
        assert_eq!(Config::new("n").max_changes, 50);
        for bad in ["0", "10001", "many"] {
            let pairs: &'static [(&str, &str)] =
                Box::leak(Box::new([("MIRAI_CHANGES_MAX_PATCHES", bad)]));
            let err = Config::new("n")
                .with_environment(&env_of(pairs))
                .unwrap_err();
            assert!(
                err.to_string().contains("MIRAI_CHANGES_MAX_PATCHES"),
                "{bad}: {err}"
            );
        }
        let c = Config::new("n")
            .with_environment(&env_of(&[("MIRAI_CHANGES_MAX_PATCHES", "10000")]))
            .unwrap();
        assert_eq!(c.max_changes, 10_000);
        assert_eq!(c.max_move_notes, 1000);
        let c = Config::new("n")
            .with_environment(&env_of(&[("MIRAI_MOVE_MAX_NOTES", "3")]))
            .unwrap();
        assert_eq!(c.max_move_notes, 3);
        for bad in ["0", "10001"] {
            let pairs: &'static [(&str, &str)] =
                Box::leak(Box::new([("MIRAI_MOVE_MAX_NOTES", bad)]));
            let err = Config::new("n").with_environment(&env_of(pairs));
            assert!(err.is_err(), "{bad}");
        }
    }

    #[test]
    fn body_timeout_defaults_to_ten_seconds_and_must_be_positive() {
        let c = Config::new("n").with_environment(&env_of(&[])).unwrap();
        assert_eq!(c.body_timeout_ms, 10_000);
        let c = Config::new("n")
            .with_environment(&env_of(&[("MIRAI_BODY_TIMEOUT_MS", "2500")]))
            .unwrap();
        assert_eq!(c.body_timeout_ms, 2500);
        assert!(Config::new("n")
            .with_environment(&env_of(&[("MIRAI_BODY_TIMEOUT_MS", "0")]))
            .is_err());
    }
}
