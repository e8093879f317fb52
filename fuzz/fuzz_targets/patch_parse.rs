//! Any text given to the patch parser ends in a patch or an `invalid_patch`
//! error, never a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mirai_fuzz::error::ErrorCode;
use mirai_fuzz::patch::parse;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = parse(text) {
        assert_eq!(e.code, ErrorCode::InvalidPatch, "{e}");
        assert!(!e.message.is_empty());
    }
});
