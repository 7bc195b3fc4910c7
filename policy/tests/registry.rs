//! Walks `plb-core`'s balancer registry and runs every entry under all
//! three drivers: the simulator, the divisible-load API on real StarPU, and
//! task mode (`STARPU_SCHED=<name>`) on real StarPU. A balancer added to the
//! registry but missing from any of them fails here.

// Unsafe code is denied in the workspace; allowed here because the test
// drives the real StarPU as a C application would (every unsafe block has
// a `// SAFETY:` comment).
#![allow(unsafe_code)]

use std::ffi::c_void;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use plb_core::balance::registry::{self, BalancerSpec};
use plb_core::balance::scenarios::lin;
use plb_core::balance::sim::{SimOptions, simulate};
use starpu_plb::catalog;
use starpu_plb::divisible::DivisibleRun;
use starpu_plb::starpu::policy_by_name;
use starpu_plb::task_mode::task_mode_counters;
use starpu_sys as sys;

mod common;
use common::{Session, Setup};

/// Units of the divisible runs and tasks of the task-mode runs.
const UNITS: usize = 4_000;
const TASKS: usize = 200;

static SEEN: OnceLock<Vec<AtomicU32>> = OnceLock::new();

fn seen() -> &'static [AtomicU32] {
    SEEN.get_or_init(|| (0..UNITS).map(|_| AtomicU32::new(0)).collect())
}

fn reset() {
    seen().iter().for_each(|s| s.store(0, Ordering::Relaxed));
}

/// Ids in `0..n` not seen exactly once (first few).
fn not_once(n: usize) -> Vec<(usize, u32)> {
    seen()[..n]
        .iter()
        .enumerate()
        .map(|(i, s)| (i, s.load(Ordering::Relaxed)))
        .filter(|&(_, c)| c != 1)
        .take(10)
        .collect()
}

/// Marks units `[offset, offset + len)` (packed in `arg`) seen.
unsafe extern "C" fn mark_kernel(_buffers: *mut *mut c_void, arg: *mut c_void) {
    let packed = arg as usize;
    let (offset, len) = (packed >> 32, packed & 0xffff_ffff);
    for s in &seen()[offset..offset + len] {
        s.fetch_add(1, Ordering::Relaxed);
    }
    // Enough work for a measurable time per unit.
    let mut x = std::hint::black_box(1.0f64);
    for _ in 0..len * 200 {
        x = std::hint::black_box(x * 1.000_000_1 + 1e-9);
    }
}

fn codelet() -> Box<sys::starpu_codelet> {
    let mut cl = Box::new(sys::starpu_codelet::default());
    cl.cpu_funcs[0] = Some(mark_kernel);
    cl.nbuffers = 0;
    cl.name = c"registry_mark".as_ptr();
    cl
}

/// Submits one task of `cl` for units `[offset, offset + len)`, pinned to
/// `worker` when given, and waits for it.
fn run_task(cl: &mut sys::starpu_codelet, offset: usize, len: usize, worker: Option<i32>) {
    // SAFETY: StarPU is initialised; the codelet outlives the task, which
    // is synchronous (submit returns once it ran).
    unsafe {
        let task = sys::starpu_task_create();
        (*task).cl = cl;
        (*task).cl_arg = ((offset << 32) | len) as *mut c_void;
        (*task).flops = len as f64;
        if let Some(w) = worker {
            (*task).set_execute_on_a_specific_worker(1);
            (*task).workerid = w as u32;
        }
        (*task).set_synchronous(1);
        assert_eq!(sys::starpu_task_submit(task), 0, "starpu_task_submit");
    }
}

fn simulated(name: &str) {
    let pus = [lin(0.001, 100.0), lin(0.002, 300.0)];
    let mut b = registry::build(name, 2, UNITS as u64).expect("builds");
    let r = simulate(b.as_mut(), &pus, UNITS as u64, SimOptions::default())
        .unwrap_or_else(|e| panic!("{name} in the simulator: {e:?}"));
    assert_eq!(r.units.iter().sum::<u64>(), UNITS as u64, "{name}");
}

fn divisible(name: &str, cl: &mut sys::starpu_codelet) {
    reset();
    let spec = BalancerSpec::parse(name).expect("registered");
    let run = DivisibleRun::on_all_workers(UNITS as u64, spec).expect("divisible run");
    let mut blocks = 0;
    while let Some(b) = run.next_block().expect("next block") {
        let t0 = std::time::Instant::now();
        run_task(cl, b.offset as usize, b.len as usize, Some(b.worker));
        run.block_done(b.id, t0.elapsed().as_secs_f64(), 0.0)
            .expect("block_done");
        blocks += 1;
    }
    assert!(blocks > 0, "{name}: no block");
    assert_eq!(not_once(UNITS), vec![], "{name}: divisible coverage");
    assert_eq!(run.stats().unwrap().units_done, UNITS as u64);
}

fn task_mode(name: &'static str) {
    let mut cl = codelet();
    reset();
    let setup = Setup {
        ncpus: 2,
        nopencl: 0,
        opencl_on_cpus: false,
        policy: name,
    };
    let session = Session::start("plb-registry", name, Duration::from_secs(120), setup);
    let before = task_mode_counters();
    for i in 0..TASKS {
        // SAFETY: StarPU is running; the codelet outlives the session.
        unsafe {
            let task = sys::starpu_task_create();
            (*task).cl = &mut *cl;
            (*task).cl_arg = ((i << 32) | 1) as *mut c_void;
            (*task).flops = 1.0;
            assert_eq!(sys::starpu_task_submit(task), 0, "starpu_task_submit");
        }
    }
    session.wait_for_all();
    let after = task_mode_counters();
    assert_eq!(not_once(TASKS), vec![], "{name}: task-mode coverage");
    if !catalog::find(name).expect("a policy").is_central_fifo() {
        assert!(
            after.epochs > before.epochs,
            "{name}: {TASKS} independent tasks formed no epoch"
        );
    }
    // Divisible runs under the same policy.
    divisible(name, &mut cl);
    session.finish();
}

#[test]
fn every_registered_balancer_runs_under_every_driver() {
    assert!(!registry::REGISTRY.is_empty());
    for entry in registry::REGISTRY {
        let name = entry.name;
        // The simulator.
        simulated(name);
        // A STARPU_SCHED policy of ours, with StarPU's struct.
        assert!(catalog::find(name).is_some(), "{name} is not a policy");
        assert!(
            policy_by_name(name).is_some(),
            "{name} has no policy struct"
        );
        // Task mode, then the divisible-load API, on real StarPU.
        task_mode(name);
        eprintln!("{name}: simulator, task mode and divisible API ok");
    }
}

/// The C header lists every balancer of the registry, and only those (its
/// list is what a C programmer reads; a balancer added to the registry
/// must be added there).
#[test]
fn the_c_header_lists_every_balancer_of_the_registry() {
    let header = include_str!("../include/plb_divisible.h");
    let marker = "Balancer names (every balancer of the library";
    let at = header
        .find(marker)
        .expect("the header's list of balancer names");
    let listed: Vec<&str> = header[at..]
        .lines()
        .nth(2)
        .expect("the names line")
        .trim_start_matches([' ', '*'])
        .split_whitespace()
        .collect();
    let registered: Vec<&str> = registry::names().collect();
    assert_eq!(listed, registered, "plb_divisible.h against the registry");
}
