//! The path resolver's lexical rules: any string ends in a normalized relative
//! path or `invalid_path`, never a panic; what passes holds no `..`, empty or
//! `.` component, control character, backslash or leading `/`, every name fits
//! the file system, and resolving it again gives itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mirai_fuzz::error::ErrorCode;
use mirai_fuzz::notes::path::{has_note_extension, is_hidden, is_plain_name, lexical, MAX_NAME_BYTES};

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else { return };
    match lexical(raw) {
        Err(e) => assert_eq!(e.code, ErrorCode::InvalidPath, "{e}"),
        Ok(rel) => {
            assert!(!rel.starts_with('/'), "{rel:?}");
            for part in rel.split('/') {
                assert!(!part.is_empty() && part != "." && part != "..", "{rel:?}");
                assert!(part.len() <= MAX_NAME_BYTES, "{rel:?}");
                assert!(is_plain_name(part), "{rel:?}");
            }
            assert_eq!(lexical(&rel).ok().as_deref(), Some(rel.as_str()), "not idempotent");
            let _ = (is_hidden(&rel), has_note_extension(&rel));
        }
    }
});
