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
