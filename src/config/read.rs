//! How every area reads its settings: [`Env`], the environment as start-up
//! sees it, with the shared rules (blank is unset, numbers are positive unless
//! said otherwise, switches are `on` or `off`) and their one error form.

use super::error::ConfigError;

/// The environment, as a function from a name to its value (the process's,
/// or a test's table).
#[derive(Clone, Copy)]
pub(super) struct Env<'a>(pub(super) &'a dyn Fn(&str) -> Option<String>);

impl Env<'_> {
    /// The value as set, blank or not (prefixes keep their spaces).
    pub(super) fn raw(&self, name: &str) -> Option<String> {
        (self.0)(name)
    }

    /// The value, unless it is unset or blank.
    pub(super) fn non_empty(&self, name: &str) -> Option<String> {
        self.raw(name).filter(|v| !v.trim().is_empty())
    }

    /// The value, trimmed, unless it is unset or blank.
    pub(super) fn trimmed(&self, name: &str) -> Option<String> {
        self.non_empty(name).map(|v| v.trim().to_string())
    }

    /// A whole number above 0, or `None` when unset; anything else is refused
    /// with `expected`.
    pub(super) fn positive(
        &self,
        name: &'static str,
        expected: &'static str,
    ) -> Result<Option<u64>, ConfigError> {
        let Some(raw) = self.non_empty(name) else {
            return Ok(None);
        };
        match raw.trim().parse::<u64>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(invalid(name, raw, expected)),
        }
    }

    /// A positive number within `range`: both refusals say `expected` (the
    /// value as written when it is no positive number, the number when it is
    /// out of range).
    pub(super) fn positive_in(
        &self,
        name: &'static str,
        range: std::ops::RangeInclusive<u64>,
        expected: &'static str,
    ) -> Result<Option<u64>, ConfigError> {
        match self.positive(name, expected)? {
            Some(n) if !range.contains(&n) => Err(invalid(name, n.to_string(), expected)),
            n => Ok(n),
        }
    }

    /// A whole number within `range` (0 allowed when the range starts there),
    /// or `None` when unset.
    pub(super) fn number_in(
        &self,
        name: &'static str,
        range: std::ops::RangeInclusive<u64>,
        expected: &'static str,
    ) -> Result<Option<u64>, ConfigError> {
        let Some(raw) = self.non_empty(name) else {
            return Ok(None);
        };
        match raw.trim().parse::<u64>() {
            Ok(n) if range.contains(&n) => Ok(Some(n)),
            _ => Err(invalid(name, raw, expected)),
        }
    }

    /// `on` or `off` (surrounding whitespace and case ignored), or `None` when unset.
    pub(super) fn switch(&self, name: &'static str) -> Result<Option<bool>, ConfigError> {
        let Some(raw) = self.non_empty(name) else {
            return Ok(None);
        };
        match raw.trim().to_ascii_lowercase().as_str() {
            "on" => Ok(Some(true)),
            "off" => Ok(Some(false)),
            _ => Err(invalid(name, raw, "on or off")),
        }
    }

    /// One of `choices` (surrounding whitespace and case ignored), or `None` when unset.
    pub(super) fn choice<T: Copy>(
        &self,
        name: &'static str,
        choices: &[(&str, T)],
        expected: &'static str,
    ) -> Result<Option<T>, ConfigError> {
        let Some(raw) = self.non_empty(name) else {
            return Ok(None);
        };
        let wanted = raw.trim().to_ascii_lowercase();
        match choices.iter().find(|(word, _)| *word == wanted) {
            Some((_, value)) => Ok(Some(*value)),
            None => Err(invalid(name, raw, expected)),
        }
    }
}

/// The one form of a refused value: `invalid NAME: VALUE (expected ...)`.
pub(super) fn invalid(name: &'static str, value: String, expected: &'static str) -> ConfigError {
    ConfigError::Value {
        name,
        value,
        expected,
    }
}

/// A count read as a `u64`, as the `usize` a setting holds.
pub(super) fn as_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// A test's environment: the value of each name in `pairs`.
#[cfg(test)]
pub(super) fn env_of(
    pairs: &'static [(&'static str, &'static str)],
) -> impl Fn(&str) -> Option<String> {
    move |name| {
        pairs
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    }
}
