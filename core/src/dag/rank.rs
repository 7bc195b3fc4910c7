//! Upward ranks of the submitted task graph below the ready tasks: a
//! task's rank is its own predicted cost plus the largest rank among its
//! successors, the length of the longest chain from its start to the end
//! of the graph submitted so far (HEFT's `rank_u`, with each task's
//! cheapest prediction over the workers).
//!
//! The caller walks the graph (a StarPU policy asks the runtime for each
//! task's successors) and prices what it found; this module keeps the
//! ranks found, so that over a run each task is walked once (O(edges)
//! in all), and forgets a task when it completes (its id, an address, may
//! be reused). A rank is computed with the successors known when the task
//! is first reached: tasks submitted later below it do not raise it.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// The store's bound: a walk reaches at most this many tasks, and a store
/// holding this many starts afresh at the next [`UpwardRanks::forget`]
/// (so at most twice this many ranks, a few MiB, are ever kept).
pub const RANKS_CAP: usize = 1 << 17;

/// The largest scratch set or list a walk (its reached tasks, the tasks it
/// found), or the caller's view of the graph it walks, keeps for the next
/// walk: a larger one is dropped, as emptying it would cost every later
/// walk its whole size.
pub const KEPT_SCRATCH: usize = 1024;

/// A task reached by a walk and not ranked yet, with its successors.
#[derive(Debug, Clone, PartialEq)]
pub struct Unranked {
    /// Its id.
    pub id: usize,
    /// The ids of its successors.
    pub succs: Vec<usize>,
}

/// The ranks found so far, by task id.
#[derive(Debug, Default)]
pub struct UpwardRanks {
    rank: HashMap<usize, f64>,
    /// A walk's tasks reached, its path as (task, its successors, the next
    /// successor to visit), and the unranked tasks it found: kept between
    /// walks, emptied, so that a walk allocates none of them once they
    /// have grown.
    seen: HashSet<usize>,
    stack: Vec<(usize, Vec<usize>, usize)>,
    found: Vec<Unranked>,
}

impl UpwardRanks {
    /// The rank of `id`, if it was settled and not forgotten.
    pub fn rank(&self, id: usize) -> Option<f64> {
        self.rank.get(&id).copied()
    }

    /// Forgets completed tasks; everything when the store is full.
    pub fn forget(&mut self, done: &[usize]) {
        for id in done {
            self.rank.remove(id);
        }
        if self.rank.len() >= RANKS_CAP {
            self.rank.clear();
        }
    }

    /// The tasks below `roots` (the roots included) with no rank yet, each
    /// after all its unranked successors (the order [`Self::settle`]
    /// needs), reaching at most `limit` tasks; `succs_of` gives a task's
    /// successors. A walk stops at ranked tasks. [`Self::settle`] ranks
    /// what the last walk found.
    pub fn unranked(
        &mut self,
        roots: &[usize],
        limit: usize,
        mut succs_of: impl FnMut(usize) -> Vec<usize>,
    ) -> &[Unranked] {
        let UpwardRanks {
            rank,
            seen,
            stack,
            found: out,
        } = self;
        seen.clear();
        stack.clear();
        out.clear();
        for &root in roots {
            if rank.contains_key(&root) || seen.len() >= limit || !seen.insert(root) {
                continue;
            }
            stack.push((root, succs_of(root), 0));
            while let Some(top) = stack.last_mut() {
                if let Some(&next) = top.1.get(top.2) {
                    top.2 += 1;
                    if !rank.contains_key(&next) && seen.len() < limit && seen.insert(next) {
                        let succs = succs_of(next);
                        stack.push((next, succs, 0));
                    }
                } else if let Some((id, succs, _)) = stack.pop() {
                    out.push(Unranked { id, succs });
                }
            }
        }
        // A large walk's set is not kept: emptying it would cost every
        // later walk its whole size.
        if seen.capacity() > KEPT_SCRATCH {
            *seen = HashSet::default();
        }
        out
    }

    /// Ranks the tasks the last [`Self::unranked`] walk found, `cost_s[i]`
    /// being the predicted cost of its `i`-th (a successor neither ranked
    /// nor found, beyond the walk's limit, counts as 0).
    pub fn settle(&mut self, cost_s: &[f64]) {
        let found = std::mem::take(&mut self.found);
        for (u, &c) in found.iter().zip(cost_s) {
            let below = u
                .succs
                .iter()
                .filter_map(|s| self.rank.get(s).copied())
                .fold(0.0, f64::max);
            let own = if c.is_finite() { c.max(0.0) } else { 0.0 };
            self.rank.insert(u.id, own + below);
        }
        // A large walk's list is not kept either (its memory).
        if found.capacity() <= KEPT_SCRATCH {
            self.found = found;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A diamond 1 -> {2, 3} -> 4, and 5 -> 3.
    fn succs(id: usize) -> Vec<usize> {
        match id {
            1 => vec![2, 3],
            2 | 3 => vec![4],
            5 => vec![3],
            _ => Vec::new(),
        }
    }

    fn cost(id: usize) -> f64 {
        match id {
            1 => 1.0,
            2 => 5.0,
            3 => 2.0,
            4 => 1.0,
            _ => 3.0,
        }
    }

    fn settle(r: &mut UpwardRanks, roots: &[usize]) -> Vec<usize> {
        let found: Vec<usize> = r
            .unranked(roots, usize::MAX, succs)
            .iter()
            .map(|u| u.id)
            .collect();
        let costs: Vec<f64> = found.iter().map(|&id| cost(id)).collect();
        r.settle(&costs);
        found
    }

    #[test]
    fn a_rank_is_the_longest_chain_below() {
        let mut r = UpwardRanks::default();
        let order = settle(&mut r, &[1]);
        // Successors come before their predecessors; 4 is reached once.
        assert_eq!(order, vec![4, 2, 3, 1]);
        assert_eq!(r.rank(4), Some(1.0));
        assert_eq!(r.rank(2), Some(6.0));
        assert_eq!(r.rank(3), Some(3.0));
        // 1 + max(6, 3): the chain through 2.
        assert_eq!(r.rank(1), Some(7.0));
    }

    #[test]
    fn a_later_walk_stops_at_ranked_tasks() {
        let mut r = UpwardRanks::default();
        settle(&mut r, &[1]);
        let mut asked = Vec::new();
        r.unranked(&[5], usize::MAX, |id| {
            asked.push(id);
            succs(id)
        });
        assert_eq!(asked, vec![5], "3 is ranked: its successors are not asked");
        r.settle(&[3.0]);
        assert_eq!(r.rank(5), Some(6.0));
    }

    #[test]
    fn forgotten_tasks_are_walked_again_and_the_limit_holds() {
        let mut r = UpwardRanks::default();
        settle(&mut r, &[1]);
        r.forget(&[1, 2]);
        assert_eq!(r.rank(1), None);
        assert_eq!(settle(&mut r, &[1]), vec![2, 1]);
        assert_eq!(r.rank(1), Some(7.0));
        // A walk limited to two tasks: the root and its first successor;
        // what lies beyond counts as 0.
        let mut fresh = UpwardRanks::default();
        let found = fresh.unranked(&[1], 2, succs);
        assert_eq!(found.iter().map(|u| u.id).collect::<Vec<_>>(), vec![2, 1]);
        fresh.settle(&[5.0, 1.0]);
        assert_eq!(fresh.rank(2), Some(5.0));
        assert_eq!(fresh.rank(1), Some(6.0));
    }
}
