//! Memory the device works on.

pub(crate) mod alloc;
mod flag;

pub use flag::{FlagCell, FlagWord};
