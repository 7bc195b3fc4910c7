//! A value alone on its cache lines, so that threads writing it do not
//! slow down threads reading its neighbours (false sharing).

use std::ops::Deref;

/// `T` aligned (and so padded) to 128 bytes: two 64-byte lines, as x86's
/// adjacent-line prefetch pairs them.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct CachePadded<T>(pub T);

impl<T> Deref for CachePadded<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbours_sit_on_different_lines() {
        let pair = [CachePadded(1u8), CachePadded(2u8)];
        let a = &pair[0] as *const _ as usize;
        let b = &pair[1] as *const _ as usize;
        assert_eq!(b - a, 128);
        assert_eq!(a % 128, 0);
        assert_eq!(*pair[1], 2);
    }
}
