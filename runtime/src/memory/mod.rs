//! Memory the device works on.

pub(crate) mod alloc;
pub(crate) mod flag;

pub use flag::{FlagCell, FlagWord};
