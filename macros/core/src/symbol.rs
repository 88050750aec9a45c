//! The words of the pipeline language, named once.
//!
//! Keywords are `syn::custom_keyword!`s so that `peek` and `lookahead1` name them in "expected
//! one of ..." errors. Type names and the statements we recognise only to reject them are
//! [`Symbol`] constants compared against the user's idents.

use std::fmt;

use proc_macro2::Ident;

/// Custom keywords, one per word of the grammar in the crate documentation.
pub mod kw {
    // Pipeline items.
    syn::custom_keyword!(pipeline);
    syn::custom_keyword!(streams);
    syn::custom_keyword!(kernels);
    syn::custom_keyword!(params);
    syn::custom_keyword!(scratch);
    syn::custom_keyword!(stage);
    syn::custom_keyword!(concurrent);
    syn::custom_keyword!(devices);
    syn::custom_keyword!(peer);
    syn::custom_keyword!(step);
    syn::custom_keyword!(swap);
    syn::custom_keyword!(switch);

    // Stream options.
    syn::custom_keyword!(priority);
    syn::custom_keyword!(high);
    syn::custom_keyword!(low);
    syn::custom_keyword!(default);
    syn::custom_keyword!(non_blocking);

    // Kernel image formats and the kernel option.
    syn::custom_keyword!(ptx);
    syn::custom_keyword!(cubin);
    syn::custom_keyword!(fatbin);
    syn::custom_keyword!(cuda_c);
    syn::custom_keyword!(host);
    syn::custom_keyword!(cpu);

    // Stage header.
    syn::custom_keyword!(on);
    syn::custom_keyword!(after);

    // Statements and their clauses.
    syn::custom_keyword!(launch);
    syn::custom_keyword!(grid);
    syn::custom_keyword!(block);
    syn::custom_keyword!(shared);
    syn::custom_keyword!(copy);
    syn::custom_keyword!(fill);
    syn::custom_keyword!(wait);
    syn::custom_keyword!(write);
    syn::custom_keyword!(call);
    syn::custom_keyword!(reads);
    syn::custom_keyword!(writes);

    // `while COND max N { ... }` (`ast/control.rs`).
    syn::custom_keyword!(max);
    // Communication statements and their clauses.
    syn::custom_keyword!(send);
    syn::custom_keyword!(recv);
    syn::custom_keyword!(all_reduce);
    syn::custom_keyword!(broadcast);
    syn::custom_keyword!(all_gather);
    syn::custom_keyword!(reduce_scatter);
    syn::custom_keyword!(to);
    syn::custom_keyword!(from);
    // `w[lo..hi] on rank EXPR`: a neighbour's part of a window.
    syn::custom_keyword!(rank);
}

/// A word of the language that is not a keyword: a runtime type name or a statement we
/// recognise in order to reject it with a better message than "expected one of ...".
#[derive(Copy, Clone, Debug)]
pub struct Symbol(&'static str);

impl Symbol {
    /// The word as the user writes it.
    pub fn as_str(self) -> &'static str {
        self.0
    }
}

impl PartialEq<Symbol> for Ident {
    fn eq(&self, word: &Symbol) -> bool {
        self == word.0
    }
}

impl fmt::Display for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// Device memory every rank of a communicator exports to its neighbours:
/// `gpu_pipeline::Window<T>`, a launch argument read here or written on another rank.
pub const WINDOW: Symbol = Symbol("Window");
/// Device memory owned by the runtime: `DeviceBuffer<T>`.
pub const DEVICE_BUFFER: Symbol = Symbol("DeviceBuffer");
/// Page-locked host memory, the only host memory that copies asynchronously: `PinnedBuffer<T>`.
pub const PINNED_BUFFER: Symbol = Symbol("PinnedBuffer");
/// A device word for stream wait/write value operations: `FlagCell` or `FlagCell<T>`.
pub const FLAG_CELL: Symbol = Symbol("FlagCell");
/// A condition a kernel sets: the type of a scratch entry and of a kernel parameter.
pub const CONDITION: Symbol = Symbol("Condition");
/// The pipeline's step counter in an `if` condition: `if step % k == 0 { ... }`.
pub const STEP: Symbol = Symbol("step");
/// The communicator of one rank (`gpu_pipeline::Communicator`), which communication
/// statements go through.
pub const COMMUNICATOR: Symbol = Symbol("Communicator");
/// The reduction operators of `all_reduce(OP)` and `reduce_scatter(OP)`, as the runtime's
/// `ReduceOp` variants name them.
pub const REDUCE_OPS: &[(&str, &str)] = &[
    ("sum", "Sum"),
    ("prod", "Prod"),
    ("max", "Max"),
    ("min", "Min"),
    ("avg", "Avg"),
];
/// Pageable host memory, recognised so that copies of it are rejected by name.
pub const VEC: Symbol = Symbol("Vec");

/// The runtime's types that view device memory the pipeline would not see if a param held
/// them inside another type: views and regions of a `DeviceBuffer`, the traits they share,
/// and the cudarc views.
pub const DEVICE_VIEWS: &[Symbol] = &[
    Symbol("DeviceView"),
    Symbol("DeviceViewMut"),
    Symbol("DeviceRegion"),
    Symbol("DeviceSource"),
    Symbol("DeviceDest"),
    Symbol("CudarcView"),
    Symbol("CudarcViewMut"),
];
/// The runtime's types that view page-locked host memory: views and regions of a
/// `PinnedBuffer`, the traits they share, and the host's guards over its elements.
pub const PINNED_VIEWS: &[Symbol] = &[
    Symbol("PinnedView"),
    Symbol("PinnedViewMut"),
    Symbol("PinnedRegion"),
    Symbol("PinnedSource"),
    Symbol("PinnedDest"),
    Symbol("HostView"),
    Symbol("HostViewMut"),
    Symbol("HostSlice"),
    Symbol("HostSliceMut"),
];
/// Unified memory the device and the host both reach: `ManagedBuffer<T>`.
pub const MANAGED_BUFFER: Symbol = Symbol("ManagedBuffer");

// Statements that have no place inside a captured step. Each has its own message in
// `check::statements::not_capturable`.
/// `synchronize`: blocks the host.
pub const SYNCHRONIZE: Symbol = Symbol("synchronize");
/// `sync`: a short spelling of `synchronize`.
pub const SYNC: Symbol = Symbol("sync");
/// `copy_blocking`: a copy that returns only when done.
pub const COPY_BLOCKING: Symbol = Symbol("copy_blocking");
/// `copy_sync`: another spelling of a blocking copy.
pub const COPY_SYNC: Symbol = Symbol("copy_sync");
/// `wait_event`: a wait on an event recorded outside the pipeline.
pub const WAIT_EVENT: Symbol = Symbol("wait_event");
/// `record_event`: a hand-wired event.
pub const RECORD_EVENT: Symbol = Symbol("record_event");
/// `alloc`: an allocation inside the step.
pub const ALLOC: Symbol = Symbol("alloc");
/// `malloc`: another spelling of `alloc`.
pub const MALLOC: Symbol = Symbol("malloc");
/// `free`: a deallocation inside the step.
pub const FREE: Symbol = Symbol("free");

/// Every statement word that is parsed only to be rejected.
pub const NOT_CAPTURABLE: &[Symbol] = &[
    SYNCHRONIZE,
    SYNC,
    COPY_BLOCKING,
    COPY_SYNC,
    WAIT_EVENT,
    RECORD_EVENT,
    ALLOC,
    MALLOC,
    FREE,
];

/// The primitive scalar types. Two different ones can never be the same type, so a mismatch
/// between them is reported at once; any other pair might be aliases of each other and is left
/// to a type assertion in the generated code.
pub const PRIMITIVE_SCALARS: &[&str] = &[
    "bool", "char", "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128",
    "usize", "f32", "f64",
];

/// `y: &mut [f32; unbounded]`: a buffer the kernel indexes without a declared bound, its
/// indices checked by the kernel itself (the spelling that says so on purpose).
pub const UNBOUNDED: &str = "unbounded";

/// The integer primitives: the scalar types a kernel bound (`y: &mut [f32; n]`) may multiply,
/// as the runtime reads them (`gpu_pipeline::IndexType`).
pub const INDEX_SCALARS: &[&str] = &[
    "u8", "u16", "u32", "u64", "usize", "i8", "i16", "i32", "i64", "isize",
];
