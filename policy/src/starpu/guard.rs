//! Keeps panics from crossing into C.

use std::panic::{AssertUnwindSafe, catch_unwind};

/// Runs `f`, turning a panic into `fallback` after logging it. Every
/// `extern "C"` entry point of the library goes through this.
pub(crate) fn ffi_guard<R>(what: &str, fallback: R, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic".into());
            log::error!("panic in {what}: {msg}; continuing with a safe fallback");
            fallback
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ffi_guard;

    #[test]
    fn a_panic_becomes_the_fallback_and_a_value_passes_through() {
        assert_eq!(ffi_guard("test", -1, || 7), 7);
        let r = ffi_guard("test", -1, || -> i32 { panic!("boom {}", 1) });
        assert_eq!(r, -1);
        let r = ffi_guard("test", None, || -> Option<u8> {
            std::panic::panic_any(3u8)
        });
        assert_eq!(r, None);
    }
}
