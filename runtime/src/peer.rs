//! Several devices in one process: peer access between devices and copies between their
//! memory.
//!
//! A buffer belongs to the device (context) that allocated it, and work of one device
//! reaches another device's memory only through a peer copy ([`Stream::copy_peer`]): over
//! NVLink or PCIe directly where [`Context::enable_peer_access`] enabled peer access, staged
//! through host memory by the driver otherwise. Events order streams across devices
//! ([`Stream::wait_event`] takes another device's event). On the CPU backend,
//! [`Context::cpu_devices`] makes simulated devices with the same rules, so multi-device
//! programs run (and are race-checked) without GPUs.

use bytemuck::Pod;

use crate::context::{Context, ContextBackend};
use crate::error::{Error, Result};
use crate::memory::check as args;
use crate::memory::{DeviceDest, DeviceSource};
use crate::stream::{Stream, StreamBackend};

impl Context {
    /// Whether this device can address `peer`'s memory directly (NVLink, or a PCIe path the
    /// platform allows). Always `true` between a device and itself, and between CPU-backend
    /// devices made together (unless made by
    /// [`Context::cpu_checked_devices_without_peer_access`] with the pair marked).
    pub fn can_access_peer(&self, peer: &Context) -> Result<bool> {
        const CALL: &str = "Context::can_access_peer";
        match (self.kind(), peer.kind()) {
            (ContextBackend::Cuda(a), ContextBackend::Cuda(b)) => a.can_access_peer(b),
            (ContextBackend::Cpu(a), ContextBackend::Cpu(b)) => Ok(a.can_access_peer(b)),
            _ => Err(Error::mismatch(
                CALL,
                "the two contexts are of different backends",
            )),
        }
    }

    /// Whether this device's work may touch `peer`'s memory now: the same device, or peer
    /// access from this device to `peer` enabled by [`Context::enable_peer_access`]. A kernel
    /// launched on this device may take a buffer of `peer` only then.
    ///
    /// ```
    /// use gpu_pipeline::Context;
    /// let devices = Context::cpu_devices(2);
    /// assert!(!devices[0].peer_access_enabled(&devices[1]));
    /// assert!(devices[0].enable_peer_access(&devices[1]).unwrap());
    /// assert!(devices[0].peer_access_enabled(&devices[1]));
    /// assert!(!devices[1].peer_access_enabled(&devices[0]), "one way only");
    /// ```
    pub fn peer_access_enabled(&self, peer: &Context) -> bool {
        match (self.kind(), peer.kind()) {
            (ContextBackend::Cuda(a), ContextBackend::Cuda(b)) => a.peer_access_enabled(b),
            (ContextBackend::Cpu(a), ContextBackend::Cpu(b)) => a.peer_access_enabled(b),
            _ => false,
        }
    }

    /// Enables direct access from this device's work to `peer`'s memory where the topology
    /// allows it (`cuCtxEnablePeerAccess`): `Ok(true)` when peer copies from this device's
    /// streams go directly, `Ok(false)` when they will be staged through host memory by the
    /// driver. Enabling twice is fine.
    ///
    /// ```no_run
    /// # fn main() -> gpu_pipeline::Result<()> {
    /// use gpu_pipeline::Context;
    /// let (a, b) = (Context::cuda(0)?, Context::cuda(1)?);
    /// let direct = a.enable_peer_access(&b)? && b.enable_peer_access(&a)?;
    /// println!("peer copies between GPU 0 and 1: {}", if direct { "direct" } else { "staged" });
    /// # Ok(()) }
    /// ```
    pub fn enable_peer_access(&self, peer: &Context) -> Result<bool> {
        const CALL: &str = "Context::enable_peer_access";
        match (self.kind(), peer.kind()) {
            (ContextBackend::Cuda(a), ContextBackend::Cuda(b)) => a.enable_peer_access(b),
            (ContextBackend::Cpu(a), ContextBackend::Cpu(b)) => Ok(a.enable_peer_access(b)),
            _ => Err(Error::mismatch(
                CALL,
                "the two contexts are of different backends",
            )),
        }
    }
}

impl Stream {
    /// Copies device memory of one device to device memory of another, in this stream's
    /// order; the stream belongs to one of the two devices (either; the copy is ordered on
    /// it like any other work). The lengths must match. Between buffers of one device it is
    /// [`Stream::copy_dtod`].
    ///
    /// Freeing either buffer afterwards waits for this stream's device too, so no buffer is
    /// freed under a copy still in flight.
    ///
    /// ```
    /// # fn main() -> gpu_pipeline::Result<()> {
    /// use gpu_pipeline::{Context, DeviceBuffer, Stream};
    /// let devices = Context::cpu_devices(2);
    /// let (s0, s1) = (Stream::new(&devices[0])?, Stream::new(&devices[1])?);
    /// let on_0 = DeviceBuffer::from_slice(&s0, &[1.0f32, 2.0, 3.0])?;
    /// let mut on_1 = DeviceBuffer::<f32>::alloc(&devices[1], 3)?;
    /// s0.synchronize()?;
    /// s1.copy_peer(&on_0, &mut on_1)?;
    /// assert_eq!(on_1.to_vec(&s1)?, [1.0, 2.0, 3.0]);
    /// # Ok(()) }
    /// ```
    pub fn copy_peer<T: Pod>(
        &self,
        src: &impl DeviceSource<T>,
        dst: &mut impl DeviceDest<T>,
    ) -> Result<()> {
        const CALL: &str = "Stream::copy_peer";
        let (s, d) = (src.device_region(), dst.device_region());
        args::same_len(CALL, s.len, d.len)?;
        let ctx = self.context();
        let (src_ctx, dst_ctx) = (&s.alloc.ctx, &d.alloc.ctx);
        if !ctx.same_machine(src_ctx) || !ctx.same_machine(dst_ctx) {
            return Err(Error::mismatch(
                CALL,
                "the buffers and the stream belong to different backends (or to CPU-backend \
                 devices not made together)",
            ));
        }
        if !src_ctx.shares_memory_with(ctx) && !dst_ctx.shares_memory_with(ctx) {
            return Err(Error::mismatch(
                CALL,
                "the stream belongs to neither buffer's device; enqueue the copy on a stream \
                 of the source's or the destination's device",
            ));
        }
        if src_ctx.shares_memory_with(dst_ctx) {
            return self.copy_dtod(src, dst);
        }
        if s.bytes == 0 {
            return Ok(());
        }
        match (self.kind(), s.cuda(), d.cuda(), s.cpu(), d.cpu()) {
            (StreamBackend::Cuda(stream), Some(src), Some(dst), ..) => stream.copy_peer(src, dst),
            (StreamBackend::Cpu(stream), .., Some(src), Some(dst)) => {
                let size = std::mem::size_of::<T>();
                let label = format!(
                    "copy_peer {} (device {}) -> {} (device {})",
                    src.describe(size),
                    src_ctx.device_index(),
                    dst.describe(size),
                    dst_ctx.device_index()
                );
                Ok(stream.copy(label, src, dst)?)
            }
            _ => Err(Error::mismatch(CALL, "a buffer of another backend")),
        }
    }
}
