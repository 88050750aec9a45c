//! The shared vocabulary: plain values that the public types and both backends name, with no
//! calls into either backend. A backend imports these (and `error`, `launch::config`, the
//! other vocabulary modules in docs/DESIGN.md's layer table), never a public type.

pub(crate) mod access;
pub(crate) mod attribute;
pub(crate) mod backend;
pub(crate) mod condition;
pub(crate) mod fault;
