//! How StarPU finds our policies.
//!
//! * StarPU 1.4: `STARPU_SCHED_LIB=libstarpu_plb.so` makes StarPU call
//!   [`starpu_get_sched_lib_policy`] / [`starpu_get_sched_lib_policies`].
//! * StarPU 1.3 has no such hook, so the library is `LD_PRELOAD`ed and
//!   interposes two of libstarpu's functions, both reached through its PLT:
//!   - `_starpu_select_sched_policy(config, name)`, StarPU's one place that
//!     turns a policy name (`STARPU_SCHED`, `conf.sched_policy_name` or a
//!     context's `STARPU_SCHED_CTX_POLICY_NAME`) into a policy: a name of
//!     ours returns our struct before StarPU's own lookup runs (which would
//!     warn "scheduling policy ... was not found"); anything else is
//!     forwarded.
//!   - `starpu_initialize` (which `starpu_init`, starpu-mpi, starpurm and
//!     OpenMP all reach): validates the `PLB_*` settings and, when
//!     `STARPU_SCHED` names one of our policies, also forwards a copy of the
//!     caller's configuration whose `sched_policy` is ours, so that StarPU
//!     runs our policy even where the first interposition is not reached.
//!
//!   A name that means one of ours but cannot run (ours with arguments,
//!   a misspelling of ours: [`crate::catalog::resolve`]) is refused at
//!   each of these doors (and at 1.4's `starpu_get_sched_lib_policy`)
//!   instead of letting StarPU warn and run its default policy; and every
//!   door first checks that the loaded libstarpu is the StarPU the library
//!   was built for ([`super::version_check`]).
//!
//!   The environment is only read, never written: StarPU reads
//!   `STARPU_SCHED` again at every `starpu_initialize`, so a second
//!   initialisation in the same process gets the same policy.
//!   `docs/architecture.md` ("How StarPU loads the library") has the
//!   details of StarPU 1.3's lookup.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::io::Write;
use std::mem::MaybeUninit;
use std::sync::OnceLock;

use starpu_sys as sys;

use super::guard::ffi_guard;
use super::registry::{null_terminated, policy_by_name};
use crate::catalog::policies;

type InitializeFn =
    unsafe extern "C" fn(*mut sys::starpu_conf, *mut c_int, *mut *mut *mut c_char) -> c_int;
type PredefinedFn = unsafe extern "C" fn() -> *mut *mut sys::starpu_sched_policy;

/// The next definition of `symbol` after this library (StarPU's own).
pub(super) fn next_symbol(symbol: &CStr) -> Option<*mut c_void> {
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name is always valid.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, symbol.as_ptr()) };
    (!p.is_null()).then_some(p)
}

fn real_initialize() -> Option<InitializeFn> {
    static REAL: OnceLock<Option<usize>> = OnceLock::new();
    let addr = (*REAL.get_or_init(|| next_symbol(c"starpu_initialize").map(|p| p as usize)))?;
    // SAFETY: the symbol is StarPU's starpu_initialize, of this type.
    Some(unsafe { std::mem::transmute::<usize, InitializeFn>(addr) })
}

/// StarPU's own `starpu_sched_get_predefined_policies`: the next
/// definition after this library, or, linked into the program with a
/// static StarPU (`plb_embedded`, where ours keeps a Rust name), StarPU's.
fn starpu_predefined() -> Option<PredefinedFn> {
    #[cfg(plb_embedded)]
    {
        Some(sys::starpu_sched_get_predefined_policies)
    }
    #[cfg(not(plb_embedded))]
    {
        let f = next_symbol(c"starpu_sched_get_predefined_policies")?;
        // SAFETY: StarPU's function of this type.
        Some(unsafe { std::mem::transmute::<*mut c_void, PredefinedFn>(f) })
    }
}

/// The names of StarPU's own policies, from the running StarPU's list.
fn starpu_own_names() -> Vec<String> {
    let mut out = Vec::new();
    if let Some(real) = starpu_predefined() {
        // SAFETY: StarPU's function, returning a NULL-terminated array of
        // static structs whose names are NULL or static C strings.
        unsafe {
            let mut p = real();
            while !p.is_null() && !(*p).is_null() {
                let name = (**p).policy_name;
                if !name.is_null() {
                    out.push(CStr::from_ptr(name).to_string_lossy().into_owned());
                }
                p = p.add(1);
            }
        }
    }
    out
}

/// Our policy struct for the scheduling policy name `name` (`Ok(None)`:
/// a name for StarPU), or the message refusing it: one of our names with
/// arguments, or a misspelling of ours (see [`crate::catalog::resolve`]),
/// for which StarPU would silently run its default policy.
pub(super) fn resolve_name(name: &str) -> Result<Option<*mut sys::starpu_sched_policy>, String> {
    let own = starpu_own_names();
    let own: Vec<&str> = own.iter().map(String::as_str).collect();
    match crate::catalog::resolve(name, &own)? {
        Some(info) => Ok(policy_by_name(info.name())),
        None => Ok(None),
    }
}

/// Which of our policies `STARPU_SCHED` selects, if any; prints our list
/// for `STARPU_SCHED=help` (StarPU then prints its own). `Err`: the value
/// names one of ours in a way neither we nor StarPU can run (message
/// printed), and StarPU must not start.
fn selected_policy() -> Result<Option<(String, *mut sys::starpu_sched_policy)>, c_int> {
    let Ok(name) = std::env::var("STARPU_SCHED") else {
        return Ok(None);
    };
    if name == "help" {
        eprintln!("\nPolicies of the plb library (libstarpu_plb):");
        for p in policies() {
            eprintln!("{:<30}\t-> {}", p.name(), p.description());
        }
    }
    match resolve_name(&name) {
        Ok(policy) => Ok(policy.map(|p| (name, p))),
        Err(msg) => {
            eprintln!("plb: error: STARPU_SCHED: {msg}; StarPU not started");
            Err(-libc::EINVAL)
        }
    }
}

/// Prints `msg` (a refused policy name, from an entry point that cannot
/// fail) and aborts: StarPU would otherwise run its default policy.
fn abort_refused_name(msg: &str) -> ! {
    // writeln! on stderr returns errors instead of panicking.
    let _ = writeln!(std::io::stderr(), "plb: error: {msg}; aborting");
    std::process::abort()
}

/// Validates the `PLB_*` tuning variables and opens `PLB_TRACE` and
/// `PLB_GRAPH`: on an invalid value, one message naming the variable and
/// what it accepts, and `-EINVAL` for `starpu_initialize` to return (never
/// a silently altered value).
pub(crate) fn check_settings() -> Result<(), c_int> {
    if let Err(e) = crate::config::tuning_from_env() {
        eprintln!("plb: error: {e}");
        return Err(-libc::EINVAL);
    }
    for open in [
        crate::trace::open_from_env,
        crate::graph_record::open_from_env,
    ] {
        if let Err(msg) = open() {
            eprintln!("plb: error: {msg}");
            return Err(-libc::EINVAL);
        }
    }
    Ok(())
}

/// Interposed StarPU entry point (StarPU 1.3 loading mechanism).
///
/// # Safety
/// Same contract as StarPU's `starpu_initialize`.
#[cfg_attr(not(plb_embedded), unsafe(no_mangle))]
pub unsafe extern "C" fn starpu_initialize(
    conf: *mut sys::starpu_conf,
    argc: *mut c_int,
    argv: *mut *mut *mut c_char,
) -> c_int {
    // A panic can only come before StarPU's call (which does not unwind)
    // or from after_init (guarded itself), so -EINVAL means "not started".
    ffi_guard("starpu_initialize", -libc::EINVAL, || {
        // SAFETY: the caller's arguments, per the contract.
        unsafe { initialize(conf, argc, argv) }
    })
}

/// The body of [`starpu_initialize`].
///
/// # Safety
/// Same contract as StarPU's `starpu_initialize`.
unsafe fn initialize(
    conf: *mut sys::starpu_conf,
    argc: *mut c_int,
    argv: *mut *mut *mut c_char,
) -> c_int {
    let Some(real) = real_initialize() else {
        eprintln!("plb: error: StarPU's starpu_initialize was not found (is libstarpu loaded?)");
        return -libc::ENOSYS;
    };
    // First: nothing of StarPU's may be read or built with another
    // StarPU's layouts.
    if let Err(code) = super::version_check::refuse_at_initialize() {
        return code;
    }
    if let Err(code) = check_settings() {
        return code;
    }
    if let Err(code) = super::emulate_codelets::before_init() {
        return code;
    }
    let selected = match selected_policy() {
        Ok(selected) => selected,
        Err(code) => return code,
    };
    let Some((name, policy)) = selected else {
        // SAFETY: untouched pass-through of the caller's arguments.
        return super::emulate_codelets::after_init(unsafe { real(conf, argc, argv) });
    };
    let mut ours = MaybeUninit::<sys::starpu_conf>::zeroed();
    // SAFETY: copies the caller's conf when given (StarPU copies it too),
    // else fills a fresh one; both leave `ours` initialised.
    let mut ours = unsafe {
        if conf.is_null() {
            sys::starpu_conf_init(ours.as_mut_ptr());
        } else {
            std::ptr::copy_nonoverlapping(conf, ours.as_mut_ptr(), 1);
        }
        ours.assume_init()
    };
    ours.sched_policy = policy;
    ours.sched_policy_name = std::ptr::null();
    log::info!("installing plb policy {name} through starpu_initialize");
    // SAFETY: forwards to StarPU with a valid conf and the caller's argv.
    // StarPU finds `STARPU_SCHED` (unchanged) through our
    // `_starpu_select_sched_policy`; the conf's `sched_policy` is the
    // fallback it uses when a name lookup fails.
    let ret = unsafe { real(&mut ours, argc, argv) };
    super::emulate_codelets::after_init(ret)
}

#[cfg(any(starpu_1_3, plb_embedded))]
type SelectFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut sys::starpu_sched_policy;

/// Interposed internal function of StarPU 1.3 (exported by Debian's
/// libstarpu and called through its PLT): `struct starpu_sched_policy
/// *_starpu_select_sched_policy(struct _starpu_machine_config *config,
/// const char *required_policy)`. Called by `starpu_initialize` with the
/// configuration's `sched_policy_name` (which StarPU sets from
/// `STARPU_SCHED`) and by `starpu_sched_ctx_create` with a context's
/// policy name. Our names return our struct; StarPU's lookup, which only
/// knows its built-in list and warns about any other name, is not run for
/// them.
///
/// # Safety
/// Same contract as StarPU's function: `required_policy` is NULL or a
/// NUL-terminated string; `config` is passed through untouched.
#[cfg(starpu_1_3)]
#[cfg_attr(not(plb_embedded), unsafe(no_mangle))]
pub unsafe extern "C" fn _starpu_select_sched_policy(
    config: *mut c_void,
    required_policy: *const c_char,
) -> *mut sys::starpu_sched_policy {
    // SAFETY: the caller's arguments, per the contract.
    unsafe { lookup_policy(config, required_policy, real_select()) }
}

#[cfg(plb_embedded)]
unsafe extern "C" {
    /// StarPU's `_starpu_select_sched_policy`, under the name the linker
    /// gives it with `-Wl,--wrap=_starpu_select_sched_policy`.
    fn __real__starpu_select_sched_policy(
        config: *mut c_void,
        required_policy: *const c_char,
    ) -> *mut sys::starpu_sched_policy;
}

/// [`_starpu_select_sched_policy`] for a program linked with a static
/// StarPU (`plb_embedded`, StarPU-MPI under SimGrid's SMPI) and
/// `-Wl,--wrap=_starpu_select_sched_policy`: the linker sends StarPU's
/// calls from its other objects (`starpu_initialize`, context creation)
/// here, and StarPU's own function is `__real__starpu_select_sched_policy`.
/// Calls from inside StarPU's `sched_policy.c` are not redirected; none of
/// them select the policy of a context.
///
/// # Safety
/// Same contract as StarPU's function.
#[cfg(plb_embedded)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __wrap__starpu_select_sched_policy(
    config: *mut c_void,
    required_policy: *const c_char,
) -> *mut sys::starpu_sched_policy {
    let real: SelectFn = __real__starpu_select_sched_policy;
    // SAFETY: the caller's arguments, per the contract.
    unsafe { lookup_policy(config, required_policy, Some(real)) }
}

/// The body of the policy lookups above: ours for one of our names, else
/// `real` (StarPU's lookup) with the same arguments.
///
/// # Safety
/// `required_policy` is NULL or a NUL-terminated string; `real` is
/// StarPU's `_starpu_select_sched_policy`.
#[cfg(any(starpu_1_3, plb_embedded))]
unsafe fn lookup_policy(
    config: *mut c_void,
    required_policy: *const c_char,
    real: Option<SelectFn>,
) -> *mut sys::starpu_sched_policy {
    let selected = ffi_guard("_starpu_select_sched_policy", None, || {
        super::version_check::abort_on_mismatch();
        if !required_policy.is_null() {
            // SAFETY: not NULL; StarPU passes a NUL-terminated name.
            let name = unsafe { CStr::from_ptr(required_policy) }.to_string_lossy();
            match resolve_name(&name) {
                Ok(Some(p)) => return Some(p),
                Ok(None) => {}
                Err(msg) => abort_refused_name(&msg),
            }
        }
        // SAFETY: StarPU's function, with the caller's arguments.
        real.map(|real| unsafe { real(config, required_policy) })
    });
    // StarPU's own function never returns NULL (it falls back to `lws`),
    // and StarPU would dereference it: stop with a message instead.
    match selected {
        Some(p) if !p.is_null() => p,
        _ => {
            // writeln! on stderr returns errors instead of panicking.
            let _ = writeln!(
                std::io::stderr(),
                "plb: error: no scheduling policy could be selected (StarPU's \
                 _starpu_select_sched_policy not found, or a panic above); aborting"
            );
            std::process::abort()
        }
    }
}

#[cfg(starpu_1_3)]
fn real_select() -> Option<SelectFn> {
    static REAL: OnceLock<Option<usize>> = OnceLock::new();
    let addr =
        (*REAL.get_or_init(|| next_symbol(c"_starpu_select_sched_policy").map(|p| p as usize)))?;
    // SAFETY: the symbol is StarPU 1.3's _starpu_select_sched_policy, of
    // this type.
    Some(unsafe { std::mem::transmute::<usize, SelectFn>(addr) })
}

/// Interposed so that code iterating StarPU's known policies sees ours too.
///
/// # Safety
/// Same contract as StarPU's function.
#[cfg_attr(not(plb_embedded), unsafe(no_mangle))]
pub unsafe extern "C" fn starpu_sched_get_predefined_policies() -> *mut *mut sys::starpu_sched_policy
{
    struct List(Vec<*mut sys::starpu_sched_policy>);
    // SAFETY: the pointers are to immutable, process-lifetime structs.
    unsafe impl Send for List {}
    // SAFETY: as above.
    unsafe impl Sync for List {}
    static MERGED: OnceLock<List> = OnceLock::new();
    /// Returned if building the merged list panicked: an empty list (the
    /// terminating NULL alone; callers only read it).
    static EMPTY: [usize; 1] = [0];
    let merged = ffi_guard("starpu_sched_get_predefined_policies", None, || {
        super::version_check::abort_on_mismatch();
        Some(MERGED.get_or_init(|| {
            let mut all = Vec::new();
            if let Some(real) = starpu_predefined() {
                // SAFETY: StarPU's function, returning a NULL-terminated
                // array of static structs.
                unsafe {
                    let mut p = real();
                    while !p.is_null() && !(*p).is_null() {
                        all.push(*p);
                        p = p.add(1);
                    }
                }
            }
            // SAFETY: the registry's list is NULL-terminated.
            unsafe {
                let mut p = null_terminated();
                while !(*p).is_null() {
                    all.push(*p);
                    p = p.add(1);
                }
            }
            all.push(std::ptr::null_mut());
            List(all)
        }))
    });
    match merged {
        Some(list) => list.0.as_ptr() as *mut _,
        None => EMPTY.as_ptr() as *mut *mut sys::starpu_sched_policy,
    }
}

/// StarPU 1.4 `STARPU_SCHED_LIB` entry point: our policy named `name`, or
/// NULL when the name is not ours.
///
/// # Safety
/// `name` must be NULL or a NUL-terminated string.
#[cfg_attr(not(plb_embedded), unsafe(no_mangle))]
pub unsafe extern "C" fn starpu_get_sched_lib_policy(
    name: *const c_char,
) -> *mut sys::starpu_sched_policy {
    ffi_guard("starpu_get_sched_lib_policy", std::ptr::null_mut(), || {
        super::version_check::abort_on_mismatch();
        if name.is_null() {
            return std::ptr::null_mut();
        }
        // SAFETY: non-null NUL-terminated string per the contract.
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        match resolve_name(&name) {
            Ok(p) => p.unwrap_or(std::ptr::null_mut()),
            Err(msg) => abort_refused_name(&msg),
        }
    })
}

/// StarPU 1.4 `STARPU_SCHED_LIB` entry point: every policy of this
/// library, NULL-terminated.
#[cfg_attr(not(plb_embedded), unsafe(no_mangle))]
pub extern "C" fn starpu_get_sched_lib_policies() -> *mut *mut sys::starpu_sched_policy {
    ffi_guard(
        "starpu_get_sched_lib_policies",
        std::ptr::null_mut(),
        || {
            super::version_check::abort_on_mismatch();
            null_terminated()
        },
    )
}

/// Name and description of every policy StarPU accepts in `STARPU_SCHED`
/// once this library is loaded: StarPU's predefined ones and ours.
pub fn known_policies() -> Vec<(String, String)> {
    let text = |p: *const c_char| {
        if p.is_null() {
            String::new()
        } else {
            // SAFETY: policy names and descriptions are static C strings.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    let mut out = Vec::new();
    // SAFETY: the merged list is NULL-terminated and its structs live for
    // the whole process.
    unsafe {
        let mut p = starpu_sched_get_predefined_policies();
        while !(*p).is_null() {
            out.push((text((**p).policy_name), text((**p).policy_description)));
            p = p.add(1);
        }
    }
    out
}
