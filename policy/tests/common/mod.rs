//! Harness shared by the integration tests that drive the real StarPU:
//! one StarPU per process at a time ([`lock_starpu`]), a watchdog that
//! aborts a deadlocked run instead of hanging it, and StarPU start-up with
//! our greedy policy in a private `STARPU_HOME`.

use std::io::Write;
use std::mem::MaybeUninit;
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use starpu_plb::diagnostics::abandoned_tasks;
use starpu_plb::starpu::policy_by_name;
use starpu_sys as sys;

/// Held by every test for its whole duration: one StarPU per process, and
/// the environment is only mutated under it.
static STARPU_LOCK: Mutex<()> = Mutex::new(());

/// Environment variables that would override the tests' configuration.
const OVERRIDING_VARS: &[&str] = &[
    "STARPU_SCHED",
    "STARPU_SCHED_LIB",
    "STARPU_NCPU",
    "STARPU_NCPUS",
    "STARPU_NCUDA",
    "STARPU_NOPENCL",
    "STARPU_NMIC",
    "STARPU_NMPI_MS",
    "STARPU_OPENCL_ON_CPUS",
    "STARPU_OPENCL_ONLY_ON_CPUS",
    "STARPU_LIMIT_MAX_SUBMITTED_TASKS",
    "STARPU_LIMIT_MIN_SUBMITTED_TASKS",
];

/// Takes the process-wide StarPU lock (recovering it if a test panicked).
pub fn lock_starpu() -> MutexGuard<'static, ()> {
    STARPU_LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Aborts the process if it is not dropped within its limit: a deadlocked
/// scheduler must fail the run, not hang it.
pub struct Watchdog {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Arms a watchdog for test `what`.
    pub fn arm(what: &'static str, limit: Duration) -> Watchdog {
        let (stop, rx) = mpsc::channel::<()>();
        let thread = thread::spawn(move || {
            if let Err(RecvTimeoutError::Timeout) = rx.recv_timeout(limit) {
                // Straight to fd 2: the harness's capture of `eprintln!`
                // would be lost with the process.
                let _ = writeln!(
                    std::io::stderr(),
                    "test `{what}` did not finish within {limit:?}: StarPU or the policy deadlocked \
                     (a task never reached a worker that can run it?); aborting"
                );
                std::process::abort();
            }
        });
        Watchdog {
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What StarPU should start.
#[derive(Clone, Copy)]
pub struct Setup {
    /// `conf.ncpus` (-1: StarPU's default, every core).
    pub ncpus: i32,
    /// `conf.nopencl`.
    pub nopencl: i32,
    /// Sets `STARPU_OPENCL_ON_CPUS=1` so PoCL's CPU device counts as an
    /// OpenCL device.
    pub opencl_on_cpus: bool,
    /// Our policy to install (`greedy`, `plb-hac`, ...).
    pub policy: &'static str,
}

/// Initialises StarPU with `setup` (its policy and workers), in a fresh
/// private `STARPU_HOME` named after `prefix` and `name`, which it returns.
/// The caller must hold [`lock_starpu`], shut StarPU down itself, then
/// call [`clean_up_after_shutdown`].
pub fn start_starpu(
    _lock: &MutexGuard<'static, ()>,
    prefix: &str,
    name: &str,
    setup: Setup,
) -> PathBuf {
    let home = std::env::temp_dir().join(format!("{prefix}-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&home).expect("creating a private STARPU_HOME");
    // SAFETY: the environment is only changed while STARPU_LOCK is held
    // (the caller passes its guard), and no StarPU thread exists between two
    // sessions; the other test threads are waiting on the lock.
    unsafe {
        for var in OVERRIDING_VARS {
            std::env::remove_var(var);
        }
        std::env::set_var("STARPU_HOME", &home);
        std::env::set_var("STARPU_SILENT", "1");
        if setup.opencl_on_cpus {
            std::env::set_var("STARPU_OPENCL_ON_CPUS", "1");
        }
    }
    let policy = policy_by_name(setup.policy).expect("the policy is registered");
    let mut conf = MaybeUninit::<sys::starpu_conf>::zeroed();
    // SAFETY: starpu_conf_init fills the whole struct (zeroed anyway).
    let rc = unsafe { sys::starpu_conf_init(conf.as_mut_ptr()) };
    assert_eq!(rc, 0, "starpu_conf_init failed");
    // SAFETY: initialised just above.
    let mut conf = unsafe { conf.assume_init() };
    conf.sched_policy = policy;
    conf.sched_policy_name = std::ptr::null();
    conf.ncpus = setup.ncpus;
    conf.nopencl = setup.nopencl;
    conf.ncuda = 0;
    // SAFETY: valid conf; StarPU copies it. Not initialised yet: the
    // previous session (if any) shut it down before releasing the lock.
    let rc = unsafe { sys::starpu_init(&mut conf) };
    assert_eq!(rc, 0, "starpu_init failed ({rc})");
    home
}

/// After `starpu_shutdown`: clears what [`start_starpu`] put in the
/// environment and removes the session's `STARPU_HOME`; the caller still
/// holds [`lock_starpu`].
pub fn clean_up_after_shutdown(_lock: &MutexGuard<'static, ()>, home: &PathBuf) {
    // SAFETY: under STARPU_LOCK; StarPU's threads are gone.
    unsafe {
        std::env::remove_var("STARPU_HOME");
        std::env::remove_var("STARPU_OPENCL_ON_CPUS");
    }
    let _ = std::fs::remove_dir_all(home);
}

/// StarPU started by [`start_starpu`] for one test, under the process-wide
/// lock and a watchdog; shut down on drop (also when the test panics, so
/// the next test can initialise it again). Not every test binary uses it.
#[allow(dead_code)]
pub struct Session {
    name: &'static str,
    home: PathBuf,
    started: std::time::Instant,
    running: bool,
    // Dropped after `Drop::drop` has shut StarPU down, in this order.
    _watchdog: Watchdog,
    lock: MutexGuard<'static, ()>,
}

#[allow(dead_code)]
impl Session {
    /// Starts StarPU with `setup` in a private `STARPU_HOME` named after
    /// `prefix` and `name`; the watchdog aborts after `limit`.
    pub fn start(prefix: &str, name: &'static str, limit: Duration, setup: Setup) -> Session {
        let lock = lock_starpu();
        let watchdog = Watchdog::arm(name, limit);
        let started = std::time::Instant::now();
        let home = start_starpu(&lock, prefix, &name.replace('/', "-"), setup);
        Session {
            name,
            home,
            started,
            running: true,
            _watchdog: watchdog,
            lock,
        }
    }

    /// Waits for every submitted task; asserts StarPU reports success.
    pub fn wait_for_all(&self) {
        // SAFETY: StarPU is initialised; called from an application thread.
        let rc = unsafe { sys::starpu_task_wait_for_all() };
        assert_eq!(rc, 0, "starpu_task_wait_for_all failed ({rc})");
    }

    /// Shuts StarPU down; returns how many tasks the policy reported
    /// abandoned (still queued) while its contexts were deinitialised.
    pub fn shutdown(&mut self) -> u64 {
        if !self.running {
            return 0;
        }
        self.running = false;
        let before = abandoned_tasks();
        // SAFETY: initialised by `start`, shut down exactly once.
        unsafe { sys::starpu_shutdown() };
        eprintln!(
            "{}: {:?} from starpu_init to the end of starpu_shutdown",
            self.name,
            self.started.elapsed()
        );
        abandoned_tasks() - before
    }

    /// Shuts down and asserts that no task was left queued.
    pub fn finish(mut self) {
        let left = self.shutdown();
        assert_eq!(left, 0, "{left} task(s) were still queued at shutdown");
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.shutdown();
        // The guard field drops after this body: still under the lock.
        clean_up_after_shutdown(&self.lock, &self.home);
    }
}
