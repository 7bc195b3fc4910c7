//! A central first-in first-out queue whose consumers may only take the
//! items they are able to process (a CPU worker cannot run an OpenCL-only
//! task). Plain data structure, no StarPU.

use std::collections::VecDeque;

/// FIFO from which a consumer takes the oldest item it accepts.
#[derive(Debug)]
pub struct CentralFifo<T> {
    items: VecDeque<T>,
}

impl<T> Default for CentralFifo<T> {
    fn default() -> Self {
        Self {
            items: VecDeque::new(),
        }
    }
}

impl<T> CentralFifo<T> {
    /// Appends an item at the back.
    pub fn push(&mut self, item: T) {
        self.items.push_back(item);
    }

    /// Removes and returns the oldest item for which `accept` returns
    /// `Some`, together with what `accept` returned. Items before it keep
    /// their order.
    pub fn take_first<R>(&mut self, mut accept: impl FnMut(&T) -> Option<R>) -> Option<(T, R)> {
        let (index, answer) = self
            .items
            .iter()
            .enumerate()
            .find_map(|(i, item)| accept(item).map(|r| (i, r)))?;
        self.items.remove(index).map(|item| (item, answer))
    }

    /// Number of queued items.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Removes every item, oldest first.
    pub fn drain(&mut self) -> Vec<T> {
        self.items.drain(..).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_order_for_a_consumer_that_accepts_everything() {
        let mut q = CentralFifo::default();
        for i in 0..5 {
            q.push(i);
        }
        let taken: Vec<i32> =
            std::iter::from_fn(|| q.take_first(|_| Some(())).map(|(v, _)| v)).collect();
        assert_eq!(taken, vec![0, 1, 2, 3, 4]);
        assert!(q.is_empty());
    }

    #[test]
    fn a_consumer_skips_what_it_cannot_process_and_keeps_the_rest_in_order() {
        let mut q = CentralFifo::default();
        // Odd items only "type B" can process.
        for i in 0..6 {
            q.push(i);
        }
        let odd_only = |v: &i32| (v % 2 == 1).then_some(*v * 10);
        assert_eq!(q.take_first(odd_only), Some((1, 10)));
        assert_eq!(q.take_first(odd_only), Some((3, 30)));
        assert_eq!(q.len(), 4);
        assert_eq!(q.drain(), vec![0, 2, 4, 5]);
        assert_eq!(q.take_first(odd_only), None);
    }

    #[test]
    fn nothing_accepted_leaves_the_queue_untouched() {
        let mut q = CentralFifo::default();
        q.push("a");
        q.push("b");
        assert!(q.take_first(|_| None::<()>).is_none());
        assert_eq!(q.len(), 2);
    }
}
