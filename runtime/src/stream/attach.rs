//! Managed-memory attachment: which streams may touch a managed buffer.

use bytemuck::Pod;

use super::Stream;
use crate::driver::check;
use crate::error::{Error, Result};
use crate::memory::alloc::same_memory_space;
use crate::memory::view::sealed::DeviceMemory;
use crate::memory::{AttachScope, ManagedBuffer};

impl Stream {
    /// Attaches `buffer` with `scope` (`cuStreamAttachMemAsync`), in this stream's order:
    /// [`AttachScope::Single`] associates it with this stream only (so work elsewhere need not
    /// wait for it to migrate), [`AttachScope::Host`] with the host, [`AttachScope::Global`]
    /// with every stream again. The whole allocation is attached.
    ///
    /// Host access through [`ManagedBuffer::as_slice`] synchronizes the context whatever the
    /// scope, so attaching never weakens what the host may see. On the host backend there is
    /// nothing to migrate or restrict, and attaching does nothing.
    pub fn attach_mem_async<T: Pod>(
        &self,
        buffer: &ManagedBuffer<T>,
        scope: AttachScope,
    ) -> Result<()> {
        let call = "Stream::attach_mem_async";
        let region = buffer.device_region();
        if !same_memory_space(&self.ctx, &region.alloc.ctx) {
            return Err(Error::invalid(
                call,
                "the buffer belongs to another context than the stream",
            ));
        }
        if self.host.is_some() {
            return Ok(());
        }
        region.enqueued_on(self);
        let (c, raw) = self.cuda(call)?;
        // SAFETY: a live stream and the base address of a live managed allocation of this
        // context (kept alive by its `Arc`); length 0 means the whole allocation, which the
        // driver requires for managed memory.
        check("cuStreamAttachMemAsync", unsafe {
            (c.driver.cuStreamAttachMemAsync)(raw, region.alloc.ptr, 0, scope.raw())
        })
    }
}
