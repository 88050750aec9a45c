//! Typed stream attributes (`cuStreamGetAttribute` / `cuStreamSetAttribute`): a CUDA-only
//! part of the stream surface, with the union encoding it needs.

use super::Stream;
use crate::driver::check;
use crate::error::{Error, Result};
use crate::sys::{self, CUlaunchAttributeID, CUlaunchAttributeValue};
use crate::vocab::attribute::{
    AccessPolicyWindow, AccessProperty, StreamAttribute, StreamAttributeId, SyncPolicy,
};

// The types live in the shared vocabulary (the CPU backend and `Context` name them too);
// their driver encodings live here.

impl AccessProperty {
    fn raw(self) -> i32 {
        match self {
            AccessProperty::Normal => sys::CU_ACCESS_PROPERTY_NORMAL,
            AccessProperty::Streaming => sys::CU_ACCESS_PROPERTY_STREAMING,
            AccessProperty::Persisting => sys::CU_ACCESS_PROPERTY_PERSISTING,
        }
    }

    fn from_raw(raw: i32) -> Option<Self> {
        Some(match raw {
            sys::CU_ACCESS_PROPERTY_NORMAL => AccessProperty::Normal,
            sys::CU_ACCESS_PROPERTY_STREAMING => AccessProperty::Streaming,
            sys::CU_ACCESS_PROPERTY_PERSISTING => AccessProperty::Persisting,
            _ => return None,
        })
    }
}

impl SyncPolicy {
    fn raw(self) -> i32 {
        match self {
            SyncPolicy::Auto => sys::CU_SYNC_POLICY_AUTO,
            SyncPolicy::Spin => sys::CU_SYNC_POLICY_SPIN,
            SyncPolicy::Yield => sys::CU_SYNC_POLICY_YIELD,
            SyncPolicy::BlockingSync => sys::CU_SYNC_POLICY_BLOCKING_SYNC,
        }
    }

    fn from_raw(raw: i32) -> Option<Self> {
        Some(match raw {
            sys::CU_SYNC_POLICY_AUTO => SyncPolicy::Auto,
            sys::CU_SYNC_POLICY_SPIN => SyncPolicy::Spin,
            sys::CU_SYNC_POLICY_YIELD => SyncPolicy::Yield,
            sys::CU_SYNC_POLICY_BLOCKING_SYNC => SyncPolicy::BlockingSync,
            _ => return None,
        })
    }
}

impl StreamAttributeId {
    fn raw(self) -> CUlaunchAttributeID {
        match self {
            StreamAttributeId::AccessPolicyWindow => CUlaunchAttributeID::ACCESS_POLICY_WINDOW,
            StreamAttributeId::SynchronizationPolicy => CUlaunchAttributeID::SYNCHRONIZATION_POLICY,
            StreamAttributeId::Priority => CUlaunchAttributeID::PRIORITY,
        }
    }
}

// The union's members all start at offset 0; we read and write them as bytes.
fn put<T: Copy>(value: &mut CUlaunchAttributeValue, member: T) {
    const { assert!(std::mem::size_of::<T>() <= 64) };
    // SAFETY: `T` fits in the 64-byte, 8-aligned union (checked above), and every member we
    // write is a plain C struct or integer.
    unsafe { std::ptr::write_unaligned(value.pad.as_mut_ptr().cast::<T>(), member) }
}

fn get<T: Copy>(value: &CUlaunchAttributeValue) -> T {
    const { assert!(std::mem::size_of::<T>() <= 64) };
    // SAFETY: as in `put`; the driver filled the member named by the attribute id, and we only
    // read integer and float fields, for which any bit pattern is valid.
    unsafe { std::ptr::read_unaligned(value.pad.as_ptr().cast::<T>()) }
}

impl StreamAttribute {
    /// The id of this attribute.
    pub fn id(&self) -> StreamAttributeId {
        match self {
            StreamAttribute::AccessPolicyWindow(_) => StreamAttributeId::AccessPolicyWindow,
            StreamAttribute::SynchronizationPolicy(_) => StreamAttributeId::SynchronizationPolicy,
            StreamAttribute::Priority(_) => StreamAttributeId::Priority,
        }
    }

    fn encode(&self) -> Result<CUlaunchAttributeValue> {
        let mut value = CUlaunchAttributeValue { pad: [0; 64] };
        match *self {
            StreamAttribute::AccessPolicyWindow(w) => {
                if !(0.0..=1.0).contains(&w.hit_ratio) {
                    return Err(Error::invalid(
                        "Stream::set_attribute",
                        format!("hit_ratio must be within 0.0..=1.0, got {}", w.hit_ratio),
                    ));
                }
                put(
                    &mut value,
                    sys::CUaccessPolicyWindow {
                        base_ptr: w.base as *mut std::ffi::c_void,
                        num_bytes: w.num_bytes,
                        hitRatio: w.hit_ratio,
                        hitProp: w.hit_property.raw(),
                        missProp: w.miss_property.raw(),
                    },
                );
            }
            StreamAttribute::SynchronizationPolicy(p) => put(&mut value, p.raw()),
            StreamAttribute::Priority(p) => put(&mut value, p),
        }
        Ok(value)
    }

    fn decode(id: StreamAttributeId, value: &CUlaunchAttributeValue) -> Result<StreamAttribute> {
        let unknown = |what: &str, raw: i32| {
            Error::invalid(
                "Stream::get_attribute",
                format!("the driver returned an unknown {what} {raw}"),
            )
        };
        Ok(match id {
            StreamAttributeId::AccessPolicyWindow => {
                let w: sys::CUaccessPolicyWindow = get(value);
                StreamAttribute::AccessPolicyWindow(AccessPolicyWindow {
                    base: w.base_ptr as sys::CUdeviceptr,
                    num_bytes: w.num_bytes,
                    hit_ratio: w.hitRatio,
                    hit_property: AccessProperty::from_raw(w.hitProp)
                        .ok_or_else(|| unknown("access property", w.hitProp))?,
                    miss_property: AccessProperty::from_raw(w.missProp)
                        .ok_or_else(|| unknown("access property", w.missProp))?,
                })
            }
            StreamAttributeId::SynchronizationPolicy => {
                let raw: i32 = get(value);
                StreamAttribute::SynchronizationPolicy(
                    SyncPolicy::from_raw(raw)
                        .ok_or_else(|| unknown("synchronization policy", raw))?,
                )
            }
            StreamAttributeId::Priority => StreamAttribute::Priority(get(value)),
        })
    }
}

impl Stream {
    /// Reads one attribute.
    pub(crate) fn get_attribute(&self, id: StreamAttributeId) -> Result<StreamAttribute> {
        let d = self.bind()?;
        let mut value = CUlaunchAttributeValue { pad: [0; 64] };
        // SAFETY: a live stream (Stream's invariant) and a 64-byte out-union.
        check("cuStreamGetAttribute", unsafe {
            (d.cuStreamGetAttribute)(self.raw(), id.raw(), &mut value)
        })?;
        StreamAttribute::decode(id, &value)
    }

    /// Sets one attribute.
    pub(crate) fn set_attribute(&self, attribute: StreamAttribute) -> Result<()> {
        let value = attribute.encode()?;
        let d = self.bind()?;
        // SAFETY: a live stream and an initialised 64-byte union.
        check("cuStreamSetAttribute", unsafe {
            (d.cuStreamSetAttribute)(self.raw(), attribute.id().raw(), &value)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_round_trip_through_the_union() {
        let w = AccessPolicyWindow {
            base: 0x7f00_0000_1000,
            num_bytes: 1 << 20,
            hit_ratio: 0.6,
            hit_property: AccessProperty::Persisting,
            miss_property: AccessProperty::Streaming,
        };
        for attr in [
            StreamAttribute::AccessPolicyWindow(w),
            StreamAttribute::SynchronizationPolicy(SyncPolicy::BlockingSync),
            StreamAttribute::Priority(-3),
        ] {
            let raw = attr.encode().unwrap();
            assert_eq!(StreamAttribute::decode(attr.id(), &raw).unwrap(), attr);
        }
    }

    #[test]
    fn a_hit_ratio_outside_zero_to_one_is_rejected() {
        let w = AccessPolicyWindow {
            base: 0,
            num_bytes: 0,
            hit_ratio: 1.5,
            hit_property: AccessProperty::Normal,
            miss_property: AccessProperty::Normal,
        };
        let err = StreamAttribute::AccessPolicyWindow(w).encode().unwrap_err();
        assert!(err.to_string().contains("hit_ratio"), "{err}");
    }

    #[test]
    fn unknown_driver_values_are_errors_not_panics() {
        let mut raw = CUlaunchAttributeValue { pad: [0; 64] };
        put(&mut raw, 77_i32);
        assert!(StreamAttribute::decode(StreamAttributeId::SynchronizationPolicy, &raw).is_err());
    }
}
