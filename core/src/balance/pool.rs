//! The single source of work units of a run.

use super::{Block, PuId};

/// Hands out `[0, total)` front to back, each unit exactly once.
#[derive(Debug, Clone)]
pub struct WorkPool {
    total: u64,
    cursor: u64,
}

impl WorkPool {
    /// A pool of `total` units.
    pub fn new(total: u64) -> WorkPool {
        WorkPool { total, cursor: 0 }
    }

    /// Units in the run.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Units not yet handed out.
    pub fn remaining(&self) -> u64 {
        self.total - self.cursor
    }

    /// Units already handed out.
    pub fn assigned(&self) -> u64 {
        self.cursor
    }

    /// Takes the next `len` units (at least 1, at most what remains) for
    /// `pu`; `None` once the pool is empty. A non-finite or non-positive
    /// `len` is taken as 1.
    pub fn take(&mut self, pu: PuId, len: f64) -> Option<Block> {
        let remaining = self.remaining();
        if remaining == 0 {
            return None;
        }
        let want = if len.is_finite() && len >= 1.0 {
            len.round() as u64
        } else {
            1
        };
        let len = want.clamp(1, remaining);
        let block = Block {
            pu,
            offset: self.cursor,
            len,
        };
        self.cursor += len;
        Some(block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hands_out_every_unit_once_in_order() {
        let mut p = WorkPool::new(10);
        assert_eq!(
            p.take(0, 4.0),
            Some(Block {
                pu: 0,
                offset: 0,
                len: 4
            })
        );
        assert_eq!(
            p.take(1, f64::NAN),
            Some(Block {
                pu: 1,
                offset: 4,
                len: 1
            })
        );
        assert_eq!(
            p.take(1, 0.2),
            Some(Block {
                pu: 1,
                offset: 5,
                len: 1
            })
        );
        assert_eq!(
            p.take(0, 1e30),
            Some(Block {
                pu: 0,
                offset: 6,
                len: 4
            })
        );
        assert_eq!(p.take(0, 3.0), None);
        assert_eq!((p.assigned(), p.remaining()), (10, 0));
    }
}
