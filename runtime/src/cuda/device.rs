//! CUDA devices: enumeration and properties.

use std::ffi::{CStr, c_char};

use crate::driver::check;
use crate::driver::driver;
use crate::error::Result;
use crate::sys;

/// A device attribute id (`CUdevice_attribute`). The associated constants name the common
/// ones; any other id from the CUDA headers can be built with `DeviceAttribute(id)`.
///
/// ```
/// use gpu_pipeline::{Device, DeviceAttribute};
/// // `cudaDevAttrL2CacheSize` from the CUDA headers: not named here, still usable.
/// let l2_cache_size = DeviceAttribute(38);
/// assert_eq!(format!("{l2_cache_size:?}"), "CUdevice_attribute(38)");
/// assert_eq!(DeviceAttribute::WARP_SIZE.known_name(), Some("WARP_SIZE"));
/// if let Ok(device) = Device::get(0) {
///     assert_eq!(device.attribute(DeviceAttribute::WARP_SIZE)?, 32);
///     assert!(device.attribute(l2_cache_size)? > 0);
/// }
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
pub use crate::sys::CUdevice_attribute as DeviceAttribute;

/// A CUDA device, by ordinal. Cheap to copy; it owns nothing.
///
/// Invariant: `raw` is the handle `cuDeviceGet` returned for `ordinal` (device handles are
/// plain integers that need no release).
///
/// ```
/// use gpu_pipeline::{Context, Device, DeviceAttribute};
/// match Device::count() {
///     Ok(count) if count > 0 => {
///         let device = Device::get(0)?;
///         let (major, _minor) = device.compute_capability()?;
///         assert!(major >= 5, "{}", device.name()?);
///         assert!(device.attribute(DeviceAttribute::MULTIPROCESSOR_COUNT)? > 0);
///         assert!(device.total_memory()? > 0);
///         let ctx = Context::new(&device)?;
///         assert_eq!(ctx.device(), Some(device));
///     }
///     // No driver (an `Err`) or no device: the CPU backend has none.
///     _ => assert_eq!(Context::cpu().device(), None),
/// }
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Device {
    ordinal: i32,
    raw: sys::CUdevice,
}

impl Device {
    /// How many CUDA devices the driver sees.
    pub fn count() -> Result<usize> {
        let d = driver()?;
        let mut n = 0;
        // SAFETY: a valid out-pointer.
        check("cuDeviceGetCount", unsafe { (d.cuDeviceGetCount)(&mut n) })?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// The device with this ordinal (`0..Device::count()`).
    pub fn get(ordinal: usize) -> Result<Device> {
        let d = driver()?;
        let ordinal = i32::try_from(ordinal).map_err(|_| {
            crate::Error::invalid("Device::get", format!("ordinal {ordinal} is out of range"))
        })?;
        let mut raw = 0;
        // SAFETY: a valid out-pointer; the driver checks the ordinal.
        check("cuDeviceGet", unsafe { (d.cuDeviceGet)(&mut raw, ordinal) })?;
        Ok(Device { ordinal, raw })
    }

    /// The ordinal this device was opened with.
    pub fn ordinal(&self) -> usize {
        self.ordinal as usize
    }

    /// The raw `CUdevice` handle, for interop with other CUDA libraries.
    pub fn handle(&self) -> sys::CUdevice {
        self.raw
    }

    /// The marketing name, e.g. `NVIDIA H100 80GB HBM3`.
    pub fn name(&self) -> Result<String> {
        let d = driver()?;
        let mut buf = [0 as c_char; 256];
        // SAFETY: the buffer is valid for its stated length; the driver NUL-terminates.
        check("cuDeviceGetName", unsafe {
            (d.cuDeviceGetName)(buf.as_mut_ptr(), buf.len() as i32, self.raw)
        })?;
        // SAFETY: NUL-terminated by the driver within the buffer (its last byte stays 0).
        Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned())
    }

    /// `(major, minor)` compute capability, e.g. `(9, 0)` for Hopper.
    pub fn compute_capability(&self) -> Result<(u32, u32)> {
        Ok((
            self.attribute(DeviceAttribute::COMPUTE_CAPABILITY_MAJOR)? as u32,
            self.attribute(DeviceAttribute::COMPUTE_CAPABILITY_MINOR)? as u32,
        ))
    }

    /// Total device memory in bytes.
    pub fn total_memory(&self) -> Result<usize> {
        let d = driver()?;
        let mut bytes = 0;
        // SAFETY: a valid out-pointer and device handle.
        check("cuDeviceTotalMem", unsafe {
            (d.cuDeviceTotalMem)(&mut bytes, self.raw)
        })?;
        Ok(bytes)
    }

    /// One device attribute.
    pub fn attribute(&self, attribute: DeviceAttribute) -> Result<i32> {
        let d = driver()?;
        let mut value = 0;
        // SAFETY: a valid out-pointer and device handle; unknown ids are rejected by the driver.
        check("cuDeviceGetAttribute", unsafe {
            (d.cuDeviceGetAttribute)(&mut value, attribute, self.raw)
        })?;
        Ok(value)
    }
}
