//! Keeps panics from crossing into C.

use std::cell::RefCell;
use std::ffi::{CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::thread::LocalKey;

/// A C API's per-thread message of its last failed call.
pub(crate) type LastError = LocalKey<RefCell<CString>>;

/// Stores `msg` as the calling thread's last error in `slot`. Never
/// panics (it also runs after a caught panic): while the thread is being
/// torn down, or if the slot is borrowed, the message is dropped.
pub(crate) fn set_last_error(slot: &'static LastError, msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    let _ = slot.try_with(|e| {
        if let Ok(mut e) = e.try_borrow_mut() {
            *e = c;
        }
    });
}

/// The calling thread's last error in `slot`, as a C string valid until
/// the next failing call on this thread; "" when the slot cannot be read
/// (thread teardown). Never panics.
pub(crate) fn last_error_ptr(slot: &'static LastError) -> *const c_char {
    slot.try_with(|e| e.try_borrow().map(|e| e.as_ptr()).ok())
        .ok()
        .flatten()
        .unwrap_or(c"".as_ptr())
}

/// `ffi_guard` for the entry points returning a status code: a panic
/// becomes `fault`, with a message in `slot`.
pub(crate) fn guard_status(
    what: &str,
    fault: c_int,
    slot: &'static LastError,
    f: impl FnOnce() -> c_int,
) -> c_int {
    const PANICKED: c_int = c_int::MIN;
    match ffi_guard(what, PANICKED, f) {
        PANICKED => {
            set_last_error(slot, &format!("internal panic in {what} (see the log)"));
            fault
        }
        r => r,
    }
}

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
