//! The C policy structs of every registered policy.

use std::sync::OnceLock;

use starpu_sys as sys;

use super::SchedPolicy;
use super::callbacks::*;
use crate::catalog::{PolicyInfo, policies};

/// Builds StarPU's description of catalog entry `info` run by policy type
/// `P` (the crate root says which type serves which entry).
pub(crate) fn policy_struct<P: SchedPolicy>(info: &'static PolicyInfo) -> sys::starpu_sched_policy {
    #[allow(unused_mut)]
    let mut s = sys::starpu_sched_policy {
        init_sched: Some(init_sched::<P>),
        deinit_sched: Some(deinit_sched::<P>),
        push_task: Some(push_task::<P>),
        pop_task: Some(pop_task::<P>),
        pre_exec_hook: Some(pre_exec_hook::<P>),
        post_exec_hook: Some(post_exec_hook::<P>),
        add_workers: Some(add_workers::<P>),
        remove_workers: Some(remove_workers::<P>),
        policy_name: info.c_name.as_ptr(),
        policy_description: info.c_description.as_ptr(),
        worker_type: sys::STARPU_WORKER_LIST,
        ..Default::default()
    };
    // A policy that prefetches at placement: StarPU 1.4's core must not
    // prefetch too (it asserts on a second prefetch of a task).
    #[cfg(not(starpu_1_3))]
    if P::PREFETCHES_AT_PLACEMENT {
        s.prefetches = 1;
    }
    s
}

/// Leaked, immutable policy structs plus a NULL-terminated pointer list.
struct Registry {
    by_name: Vec<(&'static str, *mut sys::starpu_sched_policy)>,
    list: Vec<*mut sys::starpu_sched_policy>,
}

// SAFETY: the structs are never written after construction; StarPU only
// reads them, from any thread.
unsafe impl Send for Registry {}
// SAFETY: as above.
unsafe impl Sync for Registry {}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let by_name: Vec<_> = policies()
            .iter()
            .map(|info| {
                (
                    info.name(),
                    Box::into_raw(Box::new(crate::policy_struct(info))),
                )
            })
            .collect();
        let mut list: Vec<_> = by_name.iter().map(|&(_, p)| p).collect();
        list.push(std::ptr::null_mut());
        Registry { by_name, list }
    })
}

/// StarPU's policy struct for `name`, if it is one of ours. The pointer
/// stays valid for the life of the process.
pub fn policy_by_name(name: &str) -> Option<*mut sys::starpu_sched_policy> {
    registry()
        .by_name
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, p)| p)
}

/// Every registered policy struct (without the terminating NULL).
pub fn registered_policies() -> &'static [*mut sys::starpu_sched_policy] {
    let list = &registry().list;
    &list[..list.len() - 1]
}

/// The NULL-terminated list StarPU 1.4 asks for.
pub(crate) fn null_terminated() -> *mut *mut sys::starpu_sched_policy {
    registry().list.as_ptr() as *mut _
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catalog_entry_has_a_policy_struct_with_its_name() {
        assert_eq!(registered_policies().len(), policies().len());
        for info in policies() {
            let p = policy_by_name(info.name()).expect("registered");
            // SAFETY: the registry's structs are valid for the process life.
            let name = unsafe { std::ffi::CStr::from_ptr((*p).policy_name) };
            assert_eq!(name, info.c_name);
            // SAFETY: as above.
            assert!(unsafe { (*p).push_task.is_some() && (*p).pop_task.is_some() });
        }
        assert!(policy_by_name("eager").is_none());
    }
}
