//! Memory the device works on.

mod flag;

pub use flag::{FlagCell, FlagWord};
