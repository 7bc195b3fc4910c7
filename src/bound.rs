//! `plb bound`: the lower bound on the makespan of the task graphs that
//! runs recorded with `PLB_GRAPH` (`plb_core::dag::bound`), against the
//! span of their tasks.

use std::path::PathBuf;

use clap::Args;
use plb_core::dag::bound::DEFAULT_GRID;
use plb_core::dag::record;

use crate::cli::{Failure, positive};

/// `plb bound`.
#[derive(Args)]
#[command(
    after_help = "Record a graph with PLB_GRAPH=<file.csv> under any of our policies, e.g.\n  \
PLB_GRAPH=/tmp/g.csv plb run --sched plb-heft -- ./cholesky_implicit\n\
then: plb bound /tmp/g.csv\n\
The bound counts no data transfer and takes every task's duration from StarPU's performance \
models (the fastest worker of each kind): no schedule of that graph on those workers is shorter. \
offline_heft_ms is a schedule of the same instance (HEFT knowing the whole graph, no transfers): \
the instance's optimum lies between the two. \
Where nothing ran or was ready until more tasks were pushed (the application waited), a new epoch starts: epochs add up."
)]
pub struct Command {
    /// Files written with PLB_GRAPH
    #[arg(required = true, value_name = "GRAPH.csv")]
    files: Vec<PathBuf>,
    /// Head and tail thresholds tried (GRID x GRID windows)
    #[arg(long, default_value_t = DEFAULT_GRID, value_parser = positive::<usize>())]
    grid: usize,
}

impl Command {
    /// Prints one CSV row per file.
    pub fn run(self) -> Result<std::process::ExitCode, Failure> {
        println!(
            "file,tasks,epochs,workers,bound_ms,area_ms,path_ms,offline_heft_ms,span_ms,span_over_bound,unresolved"
        );
        for path in &self.files {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let rec = record::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            let figures = rec
                .figures(self.grid)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let bound = figures.bound;
            let workers: Vec<String> = rec
                .kinds
                .iter()
                .zip(rec.epochs.first().map_or(&[][..], |g| &g.workers[..]))
                .map(|(k, n)| format!("{k}={n}"))
                .collect();
            let over = if bound.ms > 0.0 {
                format!("{:.3}", rec.span_ms / bound.ms)
            } else {
                String::new()
            };
            println!(
                "{},{},{},{},{:.1},{:.1},{:.1},{:.1},{:.1},{over},{}",
                path.display(),
                rec.epochs.iter().map(|g| g.tasks.len()).sum::<usize>(),
                rec.epochs.len(),
                workers.join(" "),
                bound.ms,
                bound.area_ms,
                bound.path_ms,
                figures.offline_heft_ms,
                rec.span_ms,
                rec.unresolved
            );
        }
        Ok(std::process::ExitCode::SUCCESS)
    }
}
