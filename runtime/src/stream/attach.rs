//! Managed-memory attachment: which streams may touch a managed buffer.

use bytemuck::Pod;

use super::{Stream, StreamBackend, mixed};
use crate::error::{Error, Result};
use crate::memory::alloc::DeviceMemory;
use crate::memory::{AttachScope, ManagedBuffer};

impl Stream {
    /// Attaches `buffer` with `scope` (`cuStreamAttachMemAsync`), in this stream's order:
    /// [`AttachScope::Single`] associates it with this stream only (so work elsewhere need not
    /// wait for it to migrate), [`AttachScope::Host`] with the host, [`AttachScope::Global`]
    /// with every stream again. The whole allocation is attached.
    ///
    /// Host access through [`ManagedBuffer::as_slice`] synchronizes the context whatever the
    /// scope, so attaching never weakens what the host may see. On the CPU backend there is
    /// nothing to migrate or restrict, and attaching does nothing.
    pub fn attach_mem_async<T: Pod>(
        &self,
        buffer: &ManagedBuffer<T>,
        scope: AttachScope,
    ) -> Result<()> {
        const CALL: &str = "Stream::attach_mem_async";
        let alloc = buffer.alloc();
        if !self.ctx.shares_memory_with(&alloc.ctx) {
            return Err(Error::mismatch(
                CALL,
                "the buffer belongs to another context than the stream",
            ));
        }
        match (&self.backend, &alloc.memory) {
            (StreamBackend::Cuda(s), DeviceMemory::Cuda(m)) => s.attach_mem(m, scope.raw()),
            (StreamBackend::Cpu(_), DeviceMemory::Cpu(_)) => Ok(()),
            _ => Err(mixed(CALL, "buffer")),
        }
    }
}
