//! Per-context counters kept by the adapter, the start times of executing
//! tasks, and the `PLB_SUMMARY` lines. Times are StarPU's clock
//! (`starpu_timing_now`, microseconds), read by the adapter and passed in.

use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::padded::CachePadded;
use crate::starpu::relaxed_lock;

/// What one worker did in a context.
#[derive(Debug, Default)]
struct WorkerCounters {
    busy_ns: AtomicU64,
    tasks: AtomicU64,
    units: AtomicU64,
}

/// Counters of one scheduling context, updated from StarPU's threads
/// when counting (for the summary: otherwise every task would bump
/// counters shared by all threads).
#[derive(Debug)]
pub struct ContextStats {
    counting: bool,
    pushed: AtomicU64,
    popped: AtomicU64,
    executed: AtomicU64,
    workers: Mutex<BTreeSet<u32>>,
    per_worker: Vec<WorkerCounters>,
    /// When the context started, µs on StarPU's clock.
    started_us: f64,
}

impl Default for ContextStats {
    fn default() -> Self {
        ContextStats::new(0, 0.0, true)
    }
}

/// The policy's own figures for the summary (model-based policies).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ModelFigures {
    /// Model refits.
    pub refits: u64,
    /// Seconds spent fitting and solving.
    pub solve_s: f64,
    /// Seconds the push/pop locks were held (measured under `PLB_SUMMARY`).
    pub lock_held_s: f64,
    /// Pops served by the worker's own line alone (task-graph policies).
    pub own_line_pops: u64,
    /// Placed tasks not prefetched at placement because of the prefetch
    /// horizon (task-graph policies, `PLB_PREFETCH_HORIZON`).
    pub prefetches_held: u64,
    /// Tasks `plb-heft`'s CPU offload placed on a CPU worker rather than
    /// on the accelerator finishing them first (`PLB_CPU_OFFLOAD`).
    pub cpu_offloads: u64,
    /// Placed tasks `plb-heft`'s line order queued ahead of a task of
    /// their priority queued before them (`PLB_LINE_ORDER`).
    pub line_jumps: u64,
}

impl ContextStats {
    /// Counters for worker ids `0..max_workers` (others are not broken
    /// down), for a context started at `started_us` (StarPU's clock).
    /// The `note_*` calls count nothing unless `counting`.
    pub fn new(max_workers: usize, started_us: f64, counting: bool) -> ContextStats {
        ContextStats {
            counting,
            pushed: AtomicU64::new(0),
            popped: AtomicU64::new(0),
            executed: AtomicU64::new(0),
            workers: Mutex::new(BTreeSet::new()),
            per_worker: (0..max_workers)
                .map(|_| WorkerCounters::default())
                .collect(),
            started_us,
        }
    }

    /// A task entered the policy through `push_task`.
    pub fn note_pushed(&self) {
        if !self.counting {
            return;
        }
        self.pushed.fetch_add(1, Ordering::Relaxed);
    }

    /// A worker took a task from the policy through `pop_task`.
    pub fn note_popped(&self) {
        if !self.counting {
            return;
        }
        self.popped.fetch_add(1, Ordering::Relaxed);
    }

    /// A task finished (`post_exec_hook`).
    pub fn note_executed(&self) {
        if !self.counting {
            return;
        }
        self.executed.fetch_add(1, Ordering::Relaxed);
    }

    /// Worker `worker` ran a task of `units` work units for `busy_s`
    /// seconds (units 0 when not measured).
    pub fn note_run(&self, worker: usize, busy_s: f64, units: f64) {
        let Some(w) = self.per_worker.get(worker).filter(|_| self.counting) else {
            return;
        };
        if busy_s.is_finite() && busy_s > 0.0 {
            w.busy_ns
                .fetch_add((busy_s * 1e9) as u64, Ordering::Relaxed);
        }
        w.tasks.fetch_add(1, Ordering::Relaxed);
        if units.is_finite() && units > 0.0 {
            w.units.fetch_add(units.round() as u64, Ordering::Relaxed);
        }
    }

    /// Workers joined the context.
    pub fn note_workers(&self, ids: impl IntoIterator<Item = u32>) {
        let mut set = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        set.extend(ids);
    }

    /// Tasks pushed so far.
    pub fn pushed(&self) -> u64 {
        self.pushed.load(Ordering::Relaxed)
    }

    /// Tasks executed so far.
    pub fn executed(&self) -> u64 {
        self.executed.load(Ordering::Relaxed)
    }

    /// The summary printed at deinit when `PLB_SUMMARY=1`: the context line
    /// (`plb: policy=... ctx=... tasks=... executed=... workers=...
    /// popped=... left=... elapsed_ms=... refits=... solve_us=... lock_us=...
    /// line_pops=... prefetch_held=... cpu_offloads=... line_jumps=...`, every
    /// value an integer) then one `plb:   worker=...` line per worker that
    /// joined the context (busy and idle percentages of the context's
    /// lifetime, tasks run and units processed), at `now_us` (StarPU's
    /// clock). A context that received no task ends with a line saying so
    /// in words (`plb: policy <name> in context <id> scheduled no task
    /// ...`): a program that submits its tasks to contexts of its own with
    /// StarPU's policies would otherwise get a `tasks=0 ... left=0` line
    /// that reads like success.
    pub fn summary_lines(
        &self,
        policy: &str,
        ctx: u32,
        left_queued: usize,
        model: ModelFigures,
        now_us: f64,
    ) -> Vec<String> {
        self.summary_lines_at(
            policy,
            ctx,
            left_queued,
            model,
            ((now_us - self.started_us) / 1e6).max(0.0),
        )
    }

    fn summary_lines_at(
        &self,
        policy: &str,
        ctx: u32,
        left_queued: usize,
        model: ModelFigures,
        elapsed_s: f64,
    ) -> Vec<String> {
        let workers = self
            .workers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut lines = vec![format!(
            "plb: policy={policy} ctx={ctx} tasks={} executed={} workers={} popped={} left={left_queued} \
             elapsed_ms={} refits={} solve_us={} lock_us={} line_pops={} prefetch_held={} cpu_offloads={} \
             line_jumps={}",
            self.pushed(),
            self.executed(),
            workers.len(),
            self.popped.load(Ordering::Relaxed),
            (elapsed_s * 1e3).round() as u64,
            model.refits,
            (model.solve_s * 1e6).round() as u64,
            (model.lock_held_s * 1e6).round() as u64,
            model.own_line_pops,
            model.prefetches_held,
            model.cpu_offloads,
            model.line_jumps,
        )];
        for id in workers {
            let Some(w) = self.per_worker.get(id as usize) else {
                continue;
            };
            let busy = w.busy_ns.load(Ordering::Relaxed) as f64 / 1e9;
            let pct = if elapsed_s > 0.0 {
                (100.0 * busy / elapsed_s).clamp(0.0, 100.0)
            } else {
                0.0
            };
            lines.push(format!(
                "plb:   worker={id} ctx={ctx} busy={pct:.1}% idle={:.1}% tasks={} units={}",
                100.0 - pct,
                w.tasks.load(Ordering::Relaxed),
                w.units.load(Ordering::Relaxed),
            ));
        }
        if self.pushed() == 0 {
            lines.push(format!(
                "plb: policy {policy} in context {ctx} scheduled no task (the program submitted \
                 none to it: its tasks, if any, went to other contexts and their policies)"
            ));
        }
        lines
    }
}

/// Times of the tasks in a context, keyed by task (its address), so that a
/// worker with several tasks in flight (pipelined CUDA or OpenCL workers)
/// gets each task's own start. Kept in shards, each behind its own lock
/// on its own cache lines: a caller that knows the thread that will ask
/// (a task's start and end are both seen by the worker that runs it)
/// names that thread's shard, and threads do not contend. Bounded: StarPU
/// skips `post_exec` for its internal tasks, whose entries would otherwise
/// stay; when [`StartTimes::CAP`] entries are held in a shard, its older
/// half is dropped.
#[derive(Debug)]
pub struct StartTimes(Box<[CachePadded<Shard>]>);

/// One shard of [`StartTimes`]: time by task.
type Shard = Mutex<HashMap<usize, f64>>;

impl Default for StartTimes {
    fn default() -> Self {
        StartTimes::sharded(1)
    }
}

impl StartTimes {
    /// Entries held at most per shard (far above the tasks in flight at
    /// once).
    pub const CAP: usize = 4096;

    /// Times in `shards` shards (at least one); a shard index beyond them
    /// wraps around.
    pub fn sharded(shards: usize) -> StartTimes {
        StartTimes((0..shards.max(1)).map(|_| CachePadded::default()).collect())
    }

    fn shard(&self, shard: usize) -> &Shard {
        &self.0[shard % self.0.len()]
    }

    /// Task `task` started at `at_us`, noted in `shard`.
    pub fn start(&self, shard: usize, task: usize, at_us: f64) {
        let mut map = relaxed_lock(self.shard(shard));
        if map.len() >= Self::CAP && !map.contains_key(&task) {
            let mut times: Vec<f64> = map.values().copied().collect();
            let mid = times.len() / 2;
            let (_, median, _) = times.select_nth_unstable_by(mid, f64::total_cmp);
            let median = *median;
            map.retain(|_, &mut t| t >= median);
        }
        map.insert(task, at_us);
    }

    /// Task `task` finished: its start time, if recorded in `shard` (and
    /// still held).
    pub fn finish(&self, shard: usize, task: usize) -> Option<f64> {
        relaxed_lock(self.shard(shard)).remove(&task)
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.0.iter().map(|s| relaxed_lock(s).len()).sum()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Writes `lines` to `out` in one `write_all` of the whole text, each
/// line ending with `\n`: a line is never split across write calls (and
/// thus never interleaved with another thread's output on stderr). Errors
/// are ignored (the summary is diagnostics).
pub fn write_lines(out: &mut impl std::io::Write, lines: &[String]) {
    let mut text = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    let _ = out.write_all(text.as_bytes());
}

/// Prints summary lines on stderr with [`write_lines`].
pub fn print_summary(lines: &[String]) {
    write_lines(&mut std::io::stderr().lock(), lines);
}

/// Whether `PLB_SUMMARY` asks for the summary line.
pub fn summary_requested() -> bool {
    std::env::var("PLB_SUMMARY").is_ok_and(|v| !v.is_empty() && v != "0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_reports_counts_workers_and_busy_time() {
        let s = ContextStats::new(4, 0.0, true);
        for _ in 0..3 {
            s.note_pushed();
        }
        s.note_popped();
        s.note_popped();
        s.note_executed();
        s.note_workers([0, 1]);
        s.note_workers([1, 2]);
        s.note_run(1, 0.5, 100.0);
        s.note_run(1, 0.25, 28.0);
        s.note_run(9, 1.0, 1.0); // beyond max_workers: ignored
        let lines = s.summary_lines_at(
            "greedy",
            4,
            1,
            ModelFigures {
                refits: 7,
                solve_s: 0.0025,
                lock_held_s: 0.0003,
                own_line_pops: 2,
                prefetches_held: 5,
                cpu_offloads: 6,
                line_jumps: 8,
            },
            1.0,
        );
        assert_eq!(
            lines[0],
            "plb: policy=greedy ctx=4 tasks=3 executed=1 workers=3 popped=2 left=1 \
             elapsed_ms=1000 refits=7 solve_us=2500 lock_us=300 line_pops=2 prefetch_held=5 cpu_offloads=6 \
             line_jumps=8"
        );
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines[1],
            "plb:   worker=0 ctx=4 busy=0.0% idle=100.0% tasks=0 units=0"
        );
        assert_eq!(
            lines[2],
            "plb:   worker=1 ctx=4 busy=75.0% idle=25.0% tasks=2 units=128"
        );
    }

    #[test]
    fn a_context_not_counting_counts_nothing() {
        let s = ContextStats::new(2, 0.0, false);
        s.note_workers([0, 1]);
        s.note_pushed();
        s.note_popped();
        s.note_executed();
        s.note_run(1, 0.5, 100.0);
        assert_eq!((s.pushed(), s.executed()), (0, 0));
        let lines = s.summary_lines_at("greedy", 0, 0, ModelFigures::default(), 1.0);
        assert!(lines[0].contains(" popped=0 "), "{lines:?}");
        assert!(lines[2].ends_with("tasks=0 units=0"), "{lines:?}");
    }

    #[test]
    fn a_context_without_tasks_says_so_in_words() {
        let s = ContextStats::new(2, 0.0, true);
        s.note_workers([0, 1]);
        let lines = s.summary_lines_at("plb-hac", 0, 0, ModelFigures::default(), 0.5);
        assert!(lines[0].starts_with("plb: policy=plb-hac ctx=0 tasks=0 executed=0 "));
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(
            lines[3].starts_with("plb: policy plb-hac in context 0 scheduled no task ("),
            "{lines:?}"
        );
        // Not with tasks.
        s.note_pushed();
        let lines = s.summary_lines_at("plb-hac", 0, 0, ModelFigures::default(), 0.5);
        assert!(
            !lines.iter().any(|l| l.contains("scheduled no task")),
            "{lines:?}"
        );
    }

    #[test]
    fn start_times_are_per_task_and_bounded() {
        let t = StartTimes::sharded(2);
        // Two tasks in flight on one worker: each keeps its own start.
        t.start(1, 0x1000, 10.0);
        t.start(1, 0x2000, 15.0);
        // A shard holds its own: the same task in another shard is apart.
        t.start(0, 0x1000, 20.0);
        assert_eq!(t.finish(1, 0x1000), Some(10.0));
        assert_eq!(t.finish(1, 0x2000), Some(15.0));
        assert_eq!(t.finish(1, 0x2000), None);
        assert_eq!(t.finish(2, 0x1000), Some(20.0), "shard 2 wraps to 0");
        assert!(t.is_empty());
        // Tasks whose post_exec never comes: each shard stays bounded and
        // keeps the newest starts.
        for i in 0..3 * StartTimes::CAP {
            t.start(0, i, i as f64);
        }
        assert!(t.len() <= StartTimes::CAP, "{}", t.len());
        let last = 3 * StartTimes::CAP - 1;
        assert_eq!(t.finish(0, last), Some(last as f64));
        assert_eq!(t.finish(0, 0), None);
    }

    /// Records every `write` call it gets.
    #[derive(Default)]
    struct Calls(Vec<Vec<u8>>);

    impl std::io::Write for Calls {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn summary_lines_are_written_in_one_call_with_their_newlines() {
        let lines = vec![
            "plb: policy=greedy ctx=0".to_string(),
            "plb:   worker=0".to_string(),
        ];
        let mut out = Calls::default();
        write_lines(&mut out, &lines);
        assert_eq!(out.0.len(), 1);
        assert_eq!(out.0[0], b"plb: policy=greedy ctx=0\nplb:   worker=0\n");
    }
}
