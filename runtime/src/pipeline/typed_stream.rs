//! Streams typed by a marker: a pipeline's `compute` stream is a `TypedStream<PCompute>`, so
//! a stream of one pipeline cannot fill another pipeline's slot (a compile error, not a race).

use std::marker::PhantomData;
use std::ops::Deref;

use crate::context::Context;
use crate::error::Result;
use crate::stream::{Stream, StreamFlags};

/// A declared stream priority, resolved against the context's range when the stream is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamPriority {
    /// The most urgent priority the context allows.
    High,
    /// The least urgent (also CUDA's default).
    Low,
    /// CUDA's default, which is the least urgent.
    Default,
    /// A value, clamped to the context's range as the driver does.
    Value(i32),
}

impl StreamPriority {
    /// The priority number for a context whose range is `(least, greatest)`.
    pub fn resolve(self, ctx: &Context) -> Result<i32> {
        let range = ctx.stream_priority_range()?;
        Ok(match self {
            StreamPriority::High => range.greatest,
            StreamPriority::Low | StreamPriority::Default => range.least,
            StreamPriority::Value(v) => range.clamp(v),
        })
    }
}

/// A [`Stream`] typed by the zero-sized marker `M` of the pipeline stream it is. It derefs to
/// `Stream`, so every stream method is there; functions a pipeline `call`s take
/// `&TypedStream<M>` to say which stream of which pipeline they run on.
pub struct TypedStream<M> {
    stream: Stream,
    label: &'static str,
    _marker: PhantomData<fn() -> M>,
}

impl<M> TypedStream<M> {
    /// Creates the stream. Generated pipelines call this; `label` is `Pipeline.stream`.
    #[doc(hidden)]
    pub fn new(
        ctx: &Context,
        priority: StreamPriority,
        non_blocking: bool,
        label: &'static str,
    ) -> Result<Self> {
        let flags = StreamFlags { non_blocking };
        let stream = Stream::with_priority(ctx, flags, priority.resolve(ctx)?)?;
        Ok(TypedStream {
            stream,
            label,
            _marker: PhantomData,
        })
    }

    /// The untyped stream.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// `Pipeline.stream`, as declared.
    pub fn label(&self) -> &'static str {
        self.label
    }
}

impl<M> Deref for TypedStream<M> {
    type Target = Stream;

    fn deref(&self) -> &Stream {
        &self.stream
    }
}

impl<M> std::fmt::Debug for TypedStream<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedStream")
            .field("label", &self.label)
            .field("stream", &self.stream)
            .finish()
    }
}
