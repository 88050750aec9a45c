//! Guards held together across one enqueue, without an allocation for the usual few.
//!
//! A graph launch holds the gate of every pinned and managed allocation its nodes touch
//! until its fence is kept. Collecting them into a `Vec` allocated and freed a list at every
//! replay that touches pinned memory (a solver reading its residual every sweep): about 60
//! of a replay's 730 instructions of host work, and a trip through the allocator (callgrind,
//! the `jacobi` solver against the do-nothing driver of `tools/fake-driver`).

/// How many guards are kept inline; more spill into a `Vec`.
const INLINE: usize = 4;

/// Guards taken in the order of the items they came from, released together when dropped.
pub(crate) struct Held<G> {
    inline: [Option<G>; INLINE],
    spilled: Vec<G>,
}

impl<G> Held<G> {
    /// Takes `take(item)` for every item, in order (the order callers lock in).
    pub(crate) fn take<'a, T>(items: &'a [T], mut take: impl FnMut(&'a T) -> G) -> Held<G> {
        let mut held = Held {
            inline: [const { None }; INLINE],
            spilled: Vec::new(),
        };
        for (k, item) in items.iter().enumerate() {
            let guard = take(item);
            match held.inline.get_mut(k) {
                Some(slot) => *slot = Some(guard),
                None => held.spilled.push(guard),
            }
        }
        held
    }

    /// Whether no guard is held.
    pub(crate) fn is_empty(&self) -> bool {
        self.inline[0].is_none()
    }

    /// The guards, in the order they were taken.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &G> {
        self.inline.iter().flatten().chain(&self.spilled)
    }

    /// The guards, in the order they were taken.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut G> {
        self.inline.iter_mut().flatten().chain(&mut self.spilled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_guard_is_held_in_order_past_the_inline_few() {
        for n in 0..=2 * INLINE + 1 {
            let items: Vec<usize> = (0..n).collect();
            let mut held = Held::take(&items, |&k| k * 10);
            assert_eq!(held.is_empty(), n == 0);
            let got: Vec<usize> = held.iter().copied().collect();
            assert_eq!(got, items.iter().map(|k| k * 10).collect::<Vec<_>>());
            for guard in held.iter_mut() {
                *guard += 1;
            }
            assert_eq!(held.iter().filter(|&&g| g % 10 == 1).count(), n);
        }
    }

    #[test]
    fn guards_are_released_when_dropped() {
        let locks: Vec<std::sync::Mutex<()>> =
            (0..INLINE + 2).map(|_| Default::default()).collect();
        {
            let held = Held::take(&locks, |m| m.try_lock().expect("free"));
            assert_eq!(held.iter().count(), locks.len());
            assert!(locks.iter().all(|m| m.try_lock().is_err()));
        }
        assert!(locks.iter().all(|m| m.try_lock().is_ok()));
    }
}
