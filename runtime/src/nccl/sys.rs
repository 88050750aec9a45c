//! Raw NCCL types and the function-pointer types of the entry points we load, as `nccl.h`
//! declares them (checked against NCCL 2.30 and the 2.31/2.32 wheels' headers).
//!
//! Result codes, data types and operators are `c_int` newtypes with constants, not Rust
//! enums: a code from a newer NCCL stays a valid value.
#![allow(non_camel_case_types, non_snake_case)]

use std::ffi::{c_char, c_int, c_uint, c_void};

use crate::sys::CUstream;

/// `ncclResult_t`.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct ncclResult_t(pub(crate) c_int);

impl ncclResult_t {
    pub(crate) const SUCCESS: ncclResult_t = ncclResult_t(0);
    pub(crate) const IN_PROGRESS: ncclResult_t = ncclResult_t(7);

    pub(crate) fn is_success(self) -> bool {
        self == ncclResult_t::SUCCESS
    }

    /// The constant's name in `nccl.h`, for codes we know.
    pub(crate) fn known_name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "ncclSuccess",
            1 => "ncclUnhandledCudaError",
            2 => "ncclSystemError",
            3 => "ncclInternalError",
            4 => "ncclInvalidArgument",
            5 => "ncclInvalidUsage",
            6 => "ncclRemoteError",
            7 => "ncclInProgress",
            8 => "ncclTimeout",
            _ => return None,
        })
    }
}

/// `ncclDataType_t`.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ncclDataType_t(pub(crate) c_int);

impl ncclDataType_t {
    pub(crate) const INT8: ncclDataType_t = ncclDataType_t(0);
    pub(crate) const UINT8: ncclDataType_t = ncclDataType_t(1);
    pub(crate) const INT32: ncclDataType_t = ncclDataType_t(2);
    pub(crate) const UINT32: ncclDataType_t = ncclDataType_t(3);
    pub(crate) const INT64: ncclDataType_t = ncclDataType_t(4);
    pub(crate) const UINT64: ncclDataType_t = ncclDataType_t(5);
    pub(crate) const FLOAT32: ncclDataType_t = ncclDataType_t(7);
    pub(crate) const FLOAT64: ncclDataType_t = ncclDataType_t(8);
}

/// `ncclRedOp_t` (an `int`-sized enum).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ncclRedOp_t(pub(crate) c_int);

impl ncclRedOp_t {
    pub(crate) const SUM: ncclRedOp_t = ncclRedOp_t(0);
    pub(crate) const PROD: ncclRedOp_t = ncclRedOp_t(1);
    pub(crate) const MAX: ncclRedOp_t = ncclRedOp_t(2);
    pub(crate) const MIN: ncclRedOp_t = ncclRedOp_t(3);
    pub(crate) const AVG: ncclRedOp_t = ncclRedOp_t(4);
}

/// The opaque communicator (`struct ncclComm`).
#[repr(C)]
pub(crate) struct ncclComm {
    _opaque: [u8; 0],
}

/// `ncclComm_t`.
pub(crate) type ncclComm_t = *mut ncclComm;

/// `NCCL_UNIQUE_ID_BYTES`.
pub(crate) const NCCL_UNIQUE_ID_BYTES: usize = 128;

/// `ncclUniqueId`: 128 bytes, alignment 1, passed **by value** to the init functions.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct ncclUniqueId {
    pub(crate) internal: [c_char; NCCL_UNIQUE_ID_BYTES],
}

/// `NCCL_API_MAGIC`.
pub(crate) const NCCL_API_MAGIC: c_uint = 0xcafe_beef;
/// `NCCL_CONFIG_UNDEF_INT`.
pub(crate) const NCCL_CONFIG_UNDEF_INT: c_int = c_int::MIN;

/// The NCCL 2.17 prefix of `ncclConfig_t`. NCCL copies `min(size, its own sizeof)` bytes over
/// its defaults and resets every field newer than `version`, so a caller may pass any prefix
/// with matching `size` and `version` (NCCL's `parseCommConfig`, unchanged since 2.18).
#[repr(C)]
pub(crate) struct ncclConfig_v21700 {
    pub(crate) size: usize,
    pub(crate) magic: c_uint,
    pub(crate) version: c_uint,
    pub(crate) blocking: c_int,
    pub(crate) cgaClusterSize: c_int,
    pub(crate) minCTAs: c_int,
    pub(crate) maxCTAs: c_int,
    pub(crate) netName: *const c_char,
}

/// The version the prefix above is declared at: NCCL 2.17.0.
pub(crate) const CONFIG_VERSION: c_uint = 21700;

// `cudaStream_t` is the driver's `CUstream` (the same `struct CUstream_st*`).
pub(crate) type cudaStream_t = CUstream;

pub(crate) type PFN_ncclGetVersion = unsafe extern "C" fn(version: *mut c_int) -> ncclResult_t;
pub(crate) type PFN_ncclGetUniqueId =
    unsafe extern "C" fn(unique_id: *mut ncclUniqueId) -> ncclResult_t;
pub(crate) type PFN_ncclCommInitRank = unsafe extern "C" fn(
    comm: *mut ncclComm_t,
    nranks: c_int,
    comm_id: ncclUniqueId,
    rank: c_int,
) -> ncclResult_t;
pub(crate) type PFN_ncclCommInitRankConfig = unsafe extern "C" fn(
    comm: *mut ncclComm_t,
    nranks: c_int,
    comm_id: ncclUniqueId,
    rank: c_int,
    config: *mut ncclConfig_v21700,
) -> ncclResult_t;
pub(crate) type PFN_ncclCommDestroy = unsafe extern "C" fn(comm: ncclComm_t) -> ncclResult_t;
pub(crate) type PFN_ncclCommAbort = unsafe extern "C" fn(comm: ncclComm_t) -> ncclResult_t;
pub(crate) type PFN_ncclCommGetAsyncError =
    unsafe extern "C" fn(comm: ncclComm_t, async_error: *mut ncclResult_t) -> ncclResult_t;
pub(crate) type PFN_ncclCommCount =
    unsafe extern "C" fn(comm: ncclComm_t, count: *mut c_int) -> ncclResult_t;
pub(crate) type PFN_ncclCommCuDevice =
    unsafe extern "C" fn(comm: ncclComm_t, device: *mut c_int) -> ncclResult_t;
pub(crate) type PFN_ncclCommUserRank =
    unsafe extern "C" fn(comm: ncclComm_t, rank: *mut c_int) -> ncclResult_t;
pub(crate) type PFN_ncclGetErrorString =
    unsafe extern "C" fn(result: ncclResult_t) -> *const c_char;
pub(crate) type PFN_ncclGetLastError = unsafe extern "C" fn(comm: ncclComm_t) -> *const c_char;
pub(crate) type PFN_ncclGroupStart = unsafe extern "C" fn() -> ncclResult_t;
pub(crate) type PFN_ncclGroupEnd = unsafe extern "C" fn() -> ncclResult_t;
pub(crate) type PFN_ncclSend = unsafe extern "C" fn(
    sendbuff: *const c_void,
    count: usize,
    datatype: ncclDataType_t,
    peer: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t;
pub(crate) type PFN_ncclRecv = unsafe extern "C" fn(
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataType_t,
    peer: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t;
pub(crate) type PFN_ncclAllReduce = unsafe extern "C" fn(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataType_t,
    op: ncclRedOp_t,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t;
pub(crate) type PFN_ncclBroadcast = unsafe extern "C" fn(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: ncclDataType_t,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t;
pub(crate) type PFN_ncclAllGather = unsafe extern "C" fn(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    sendcount: usize,
    datatype: ncclDataType_t,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t;
pub(crate) type PFN_ncclReduceScatter = unsafe extern "C" fn(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    recvcount: usize,
    datatype: ncclDataType_t,
    op: ncclRedOp_t,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_nccl_h() {
        assert_eq!(std::mem::size_of::<ncclUniqueId>(), 128);
        assert_eq!(std::mem::align_of::<ncclUniqueId>(), 1);
        // The 2.17 prefix: size, magic, version, blocking, cgaClusterSize, minCTAs, maxCTAs
        // at 0, 8, 12, 16, 20, 24, 28 and netName at 32.
        assert_eq!(std::mem::size_of::<ncclConfig_v21700>(), 40);
        assert_eq!(std::mem::offset_of!(ncclConfig_v21700, blocking), 16);
        assert_eq!(std::mem::offset_of!(ncclConfig_v21700, maxCTAs), 28);
        assert_eq!(std::mem::offset_of!(ncclConfig_v21700, netName), 32);
        assert_eq!(std::mem::size_of::<ncclResult_t>(), 4);
        assert_eq!(std::mem::size_of::<ncclRedOp_t>(), 4);
    }
}
