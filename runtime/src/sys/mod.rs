//! Raw CUDA driver types: handles, result codes, enums as constants, structs and the
//! function-pointer types of the entry points we load.
//!
//! Nothing here is safe to call; `driver` loads the table and the safe types above it wrap
//! every call. Enumerations are `#[repr(transparent)]` newtypes with associated constants,
//! never Rust enums: a value from a newer driver must stay a valid value, not undefined
//! behaviour (the same choice ash makes for Vulkan).
//!
//! Longer than 900 lines on purpose: one flat list of declarations transcribed from
//! `cuda.h`, read by searching for a name rather than top to bottom; splitting it would
//! only scatter one header's names over several files.
#![allow(non_camel_case_types, non_snake_case, missing_docs)]
// The C unions and opaque structs have no meaningful Debug form.
#![allow(missing_debug_implementations)]

use std::ffi::{c_char, c_int, c_uint, c_void};

/// The launcher's one step inside a forked rank before `exec` (not a driver type; it lives
/// here because `sys` is where `unsafe` may be).
pub(crate) mod process;

/// Declares a transparent integer newtype with named constants.
macro_rules! c_enum {
    ($(#[$meta:meta])* $name:ident($repr:ty) { $($(#[$cmeta:meta])* $const:ident = $value:expr,)* }) => {
        $(#[$meta])*
        #[repr(transparent)]
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(pub $repr);
        impl $name {
            $($(#[$cmeta])* pub const $const: $name = $name($value);)*

            /// The constant's name, when this value is one we know.
            pub fn known_name(self) -> Option<&'static str> {
                match self {
                    $(Self::$const => Some(stringify!($const)),)*
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }
        }
        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self.known_name() {
                    Some(name) => f.write_str(name),
                    None => write!(f, "{}({})", stringify!($name), self.0),
                }
            }
        }
    };
}

c_enum! {
    /// A driver call's status. Any value is valid; unknown ones come from newer drivers.
    ///
    /// What [`Error::code`](crate::Error::code) gives for a failed driver call:
    ///
    /// ```
    /// use gpu_pipeline::sys::CUresult;
    /// let code = CUresult::CUDA_ERROR_OUT_OF_MEMORY;
    /// assert_eq!(code, CUresult(2));
    /// assert_eq!(code.known_name(), Some("CUDA_ERROR_OUT_OF_MEMORY"));
    /// assert_eq!(format!("{:?}", CUresult(12345)), "CUresult(12345)"); // unknown, not UB
    /// ```
    CUresult(c_int) {
        CUDA_SUCCESS = 0,
        CUDA_ERROR_INVALID_VALUE = 1,
        CUDA_ERROR_OUT_OF_MEMORY = 2,
        CUDA_ERROR_NOT_INITIALIZED = 3,
        CUDA_ERROR_DEINITIALIZED = 4,
        CUDA_ERROR_STUB_LIBRARY = 34,
        CUDA_ERROR_NO_DEVICE = 100,
        CUDA_ERROR_INVALID_DEVICE = 101,
        CUDA_ERROR_INVALID_IMAGE = 200,
        CUDA_ERROR_INVALID_CONTEXT = 201,
        CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
        CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
        CUDA_ERROR_INVALID_PTX = 218,
        CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
        CUDA_ERROR_INVALID_SOURCE = 300,
        CUDA_ERROR_INVALID_HANDLE = 400,
        CUDA_ERROR_NOT_FOUND = 500,
        CUDA_ERROR_NOT_READY = 600,
        CUDA_ERROR_ILLEGAL_ADDRESS = 700,
        CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
        CUDA_ERROR_LAUNCH_TIMEOUT = 702,
        CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
        CUDA_ERROR_TOO_MANY_PEERS = 711,
        CUDA_ERROR_ILLEGAL_INSTRUCTION = 715,
        CUDA_ERROR_MISALIGNED_ADDRESS = 716,
        CUDA_ERROR_INVALID_PC = 718,
        CUDA_ERROR_LAUNCH_FAILED = 719,
        CUDA_ERROR_NOT_PERMITTED = 800,
        CUDA_ERROR_NOT_SUPPORTED = 801,
        CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
        CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
        CUDA_ERROR_STREAM_CAPTURE_MERGE = 902,
        CUDA_ERROR_STREAM_CAPTURE_UNMATCHED = 903,
        CUDA_ERROR_STREAM_CAPTURE_UNJOINED = 904,
        CUDA_ERROR_STREAM_CAPTURE_ISOLATION = 905,
        CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
        CUDA_ERROR_CAPTURED_EVENT = 907,
        CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908,
        CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE = 910,
        CUDA_ERROR_UNKNOWN = 999,
    }
}

impl CUresult {
    /// Whether this is `CUDA_SUCCESS`.
    ///
    /// ```
    /// use gpu_pipeline::sys::CUresult;
    /// assert!(CUresult::CUDA_SUCCESS.is_success());
    /// assert!(!CUresult(999).is_success()); // a code of a newer driver is a value too
    /// ```
    pub fn is_success(self) -> bool {
        self == Self::CUDA_SUCCESS
    }
}

c_enum! {
    /// `CUdevice_attribute`: the attributes we read by name; any other id may be passed too.
    CUdevice_attribute(c_int) {
        MAX_THREADS_PER_BLOCK = 1,
        MAX_BLOCK_DIM_X = 2,
        MAX_BLOCK_DIM_Y = 3,
        MAX_BLOCK_DIM_Z = 4,
        MAX_GRID_DIM_X = 5,
        MAX_GRID_DIM_Y = 6,
        MAX_GRID_DIM_Z = 7,
        MAX_SHARED_MEMORY_PER_BLOCK = 8,
        WARP_SIZE = 10,
        CLOCK_RATE = 13,
        MULTIPROCESSOR_COUNT = 16,
        CONCURRENT_KERNELS = 31,
        PCI_BUS_ID = 33,
        ASYNC_ENGINE_COUNT = 40,
        UNIFIED_ADDRESSING = 41,
        COMPUTE_CAPABILITY_MAJOR = 75,
        COMPUTE_CAPABILITY_MINOR = 76,
        MANAGED_MEMORY = 83,
        CONCURRENT_MANAGED_ACCESS = 89,
        CAN_USE_64_BIT_STREAM_MEM_OPS = 93,
        MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
        MAX_PERSISTING_L2_CACHE_SIZE = 108,
        MAX_ACCESS_POLICY_WINDOW_SIZE = 109,
        MEMORY_POOLS_SUPPORTED = 115,
        CAN_USE_STREAM_MEM_OPS = 120,
    }
}

c_enum! {
    /// `CUstreamCaptureStatus`.
    CUstreamCaptureStatus(c_int) {
        NONE = 0,
        ACTIVE = 1,
        INVALIDATED = 2,
    }
}

c_enum! {
    /// `CUstreamCaptureMode`.
    CUstreamCaptureMode(c_int) {
        GLOBAL = 0,
        THREAD_LOCAL = 1,
        RELAXED = 2,
    }
}

c_enum! {
    /// `CUlaunchAttributeID`, also used as `CUstreamAttrID`.
    CUlaunchAttributeID(c_int) {
        ACCESS_POLICY_WINDOW = 1,
        SYNCHRONIZATION_POLICY = 3,
        PRIORITY = 8,
    }
}

c_enum! {
    /// `CUgraphNodeType`.
    CUgraphNodeType(c_int) {
        KERNEL = 0,
        MEMCPY = 1,
        MEMSET = 2,
        HOST = 3,
        GRAPH = 4,
        EMPTY = 5,
        WAIT_EVENT = 6,
        EVENT_RECORD = 7,
        EXT_SEMAS_SIGNAL = 8,
        EXT_SEMAS_WAIT = 9,
        MEM_ALLOC = 10,
        MEM_FREE = 11,
        BATCH_MEM_OP = 12,
        CONDITIONAL = 13,
    }
}

c_enum! {
    /// `CUgraphExecUpdateResult`.
    CUgraphExecUpdateResult(c_int) {
        SUCCESS = 0,
        ERROR = 1,
        ERROR_TOPOLOGY_CHANGED = 2,
        ERROR_NODE_TYPE_CHANGED = 3,
        ERROR_FUNCTION_CHANGED = 4,
        ERROR_PARAMETERS_CHANGED = 5,
        ERROR_NOT_SUPPORTED = 6,
        ERROR_UNSUPPORTED_FUNCTION_CHANGE = 7,
        ERROR_ATTRIBUTES_CHANGED = 8,
    }
}

c_enum! {
    /// `CUjit_option`: the options we pass to `cuModuleLoadDataEx` to get the JIT logs.
    CUjit_option(c_int) {
        INFO_LOG_BUFFER = 3,
        INFO_LOG_BUFFER_SIZE_BYTES = 4,
        ERROR_LOG_BUFFER = 5,
        ERROR_LOG_BUFFER_SIZE_BYTES = 6,
    }
}

c_enum! {
    /// `CUfunction_attribute`.
    CUfunction_attribute(c_int) {
        MAX_THREADS_PER_BLOCK = 0,
        SHARED_SIZE_BYTES = 1,
        CONST_SIZE_BYTES = 2,
        LOCAL_SIZE_BYTES = 3,
        NUM_REGS = 4,
        PTX_VERSION = 5,
        BINARY_VERSION = 6,
        MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
    }
}

c_enum! {
    /// `CUmemPool_attribute`.
    CUmemPool_attribute(c_int) {
        REUSE_FOLLOW_EVENT_DEPENDENCIES = 1,
        REUSE_ALLOW_OPPORTUNISTIC = 2,
        REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3,
        RELEASE_THRESHOLD = 4,
        RESERVED_MEM_CURRENT = 5,
        RESERVED_MEM_HIGH = 6,
        USED_MEM_CURRENT = 7,
        USED_MEM_HIGH = 8,
    }
}

/// `CUdevice`: an ordinal-like handle.
pub type CUdevice = c_int;
/// `CUdeviceptr`: a device address.
pub type CUdeviceptr = u64;

/// Declares opaque handle types: a pointer to a private struct, like the C header.
macro_rules! handles {
    ($($name:ident => $st:ident;)*) => {$(
        #[repr(C)]
        pub struct $st { _private: [u8; 0] }
        pub type $name = *mut $st;
    )*};
}

handles! {
    CUcontext => CUctx_st;
    CUstream => CUstream_st;
    CUevent => CUevent_st;
    CUmodule => CUmod_st;
    CUfunction => CUfunc_st;
    CUgraph => CUgraph_st;
    CUgraphNode => CUgraphNode_st;
    CUgraphExec => CUgraphExec_st;
    CUmemoryPool => CUmemPoolHandle_st;
    CUkernel => CUkern_st;
}

// Flags, as the header defines them.
pub const CU_STREAM_DEFAULT: c_uint = 0x0;
pub const CU_STREAM_NON_BLOCKING: c_uint = 0x1;
pub const CU_EVENT_DEFAULT: c_uint = 0x0;
pub const CU_EVENT_BLOCKING_SYNC: c_uint = 0x1;
pub const CU_EVENT_DISABLE_TIMING: c_uint = 0x2;
pub const CU_EVENT_WAIT_DEFAULT: c_uint = 0x0;
pub const CU_MEM_ATTACH_GLOBAL: c_uint = 0x1;
pub const CU_MEM_ATTACH_HOST: c_uint = 0x2;
pub const CU_MEM_ATTACH_SINGLE: c_uint = 0x4;
pub const CU_MEMHOSTALLOC_PORTABLE: c_uint = 0x1;
pub const CU_MEMHOSTALLOC_DEVICEMAP: c_uint = 0x2;
pub const CU_MEMHOSTREGISTER_PORTABLE: c_uint = 0x1;
pub const CU_MEMHOSTREGISTER_DEVICEMAP: c_uint = 0x2;
pub const CU_CTX_SCHED_AUTO: c_uint = 0x0;
pub const CU_CTX_SCHED_SPIN: c_uint = 0x1;
pub const CU_CTX_SCHED_YIELD: c_uint = 0x2;
pub const CU_CTX_SCHED_BLOCKING_SYNC: c_uint = 0x4;
pub const CU_CTX_SCHED_MASK: c_uint = 0x7;
pub const CU_STREAM_WAIT_VALUE_GEQ: c_uint = 0x0;
pub const CU_STREAM_WAIT_VALUE_EQ: c_uint = 0x1;
pub const CU_STREAM_WAIT_VALUE_AND: c_uint = 0x2;
pub const CU_STREAM_WAIT_VALUE_NOR: c_uint = 0x3;
pub const CU_STREAM_WAIT_VALUE_FLUSH: c_uint = 1 << 30;
pub const CU_STREAM_WRITE_VALUE_DEFAULT: c_uint = 0x0;
pub const CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER: c_uint = 0x1;
pub const CU_STREAM_MEM_OP_WAIT_VALUE_32: c_uint = 1;
pub const CU_STREAM_MEM_OP_WRITE_VALUE_32: c_uint = 2;
pub const CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES: c_uint = 3;
pub const CU_STREAM_MEM_OP_WAIT_VALUE_64: c_uint = 4;
pub const CU_STREAM_MEM_OP_WRITE_VALUE_64: c_uint = 5;
pub const CU_STREAM_MEM_OP_BARRIER: c_uint = 6;
pub const CU_GET_PROC_ADDRESS_DEFAULT: u64 = 0;
pub const CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE: c_uint = 1;
pub const CU_ACCESS_PROPERTY_NORMAL: c_int = 0;
pub const CU_ACCESS_PROPERTY_STREAMING: c_int = 1;
pub const CU_ACCESS_PROPERTY_PERSISTING: c_int = 2;
pub const CU_SYNC_POLICY_AUTO: c_int = 1;
pub const CU_SYNC_POLICY_SPIN: c_int = 2;
pub const CU_SYNC_POLICY_YIELD: c_int = 3;
pub const CU_SYNC_POLICY_BLOCKING_SYNC: c_int = 4;

/// `CUaccessPolicyWindow`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CUaccessPolicyWindow {
    pub base_ptr: *mut c_void,
    pub num_bytes: usize,
    pub hitRatio: f32,
    pub hitProp: c_int,
    pub missProp: c_int,
}

/// `CUlaunchAttributeValue` / `CUstreamAttrValue`: a 64-byte union; we read the members we
/// know through the typed accessors in `stream::attribute`.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct CUlaunchAttributeValue {
    pub pad: [u8; 64],
}

impl std::fmt::Debug for CUlaunchAttributeValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CUlaunchAttributeValue")
            .finish_non_exhaustive()
    }
}

/// `CUstreamMemOpWaitValueParams_st` and `...WriteValueParams_st` share this layout.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CUstreamMemOpValueParams {
    pub operation: c_uint,
    pub address: CUdeviceptr,
    /// `value` (32-bit) or `value64`: a 32-bit value sits in the low half on little-endian.
    pub value64: u64,
    pub flags: c_uint,
    pub alias: CUdeviceptr,
}

/// `CUstreamBatchMemOpParams`: a 48-byte union. We build it from the typed ops in
/// `stream::memop`, so only the byte layout matters here.
#[repr(C)]
#[derive(Clone, Copy)]
pub union CUstreamBatchMemOpParams {
    pub operation: c_uint,
    pub waitValue: CUstreamMemOpValueParams,
    pub writeValue: CUstreamMemOpValueParams,
    pub pad: [u64; 6],
}

/// `CUDA_KERNEL_NODE_PARAMS_v2` (CUDA 12.0).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CUDA_KERNEL_NODE_PARAMS {
    pub func: CUfunction,
    pub gridDimX: c_uint,
    pub gridDimY: c_uint,
    pub gridDimZ: c_uint,
    pub blockDimX: c_uint,
    pub blockDimY: c_uint,
    pub blockDimZ: c_uint,
    pub sharedMemBytes: c_uint,
    pub kernelParams: *mut *mut c_void,
    pub extra: *mut *mut c_void,
    pub kern: CUkernel,
    pub ctx: CUcontext,
}

/// `CUgraphExecUpdateResultInfo`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CUgraphExecUpdateResultInfo {
    pub result: CUgraphExecUpdateResult,
    pub errorNode: CUgraphNode,
    pub errorFromNode: CUgraphNode,
}

/// `CUhostFn`.
pub type CUhostFn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;
/// `CUstreamCallback`.
pub type CUstreamCallback =
    Option<unsafe extern "C" fn(stream: CUstream, status: CUresult, user_data: *mut c_void)>;

/// `cuGetProcAddress_v2` (CUDA 12.0): the last argument reports why a symbol was not found.
pub type PFN_cuGetProcAddress_v2 = unsafe extern "C" fn(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
    symbol_status: *mut c_int,
) -> CUresult;
/// `cuGetProcAddress` (CUDA 11.3), for drivers older than 12.0.
pub type PFN_cuGetProcAddress_v1 = unsafe extern "C" fn(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
) -> CUresult;

// Entry points. Each type is the ABI of the version `driver` asks `cuGetProcAddress` for.
pub type PFN_cuInit = unsafe extern "C" fn(flags: c_uint) -> CUresult;
pub type PFN_cuDriverGetVersion = unsafe extern "C" fn(version: *mut c_int) -> CUresult;
pub type PFN_cuGetErrorName =
    unsafe extern "C" fn(error: CUresult, name: *mut *const c_char) -> CUresult;
pub type PFN_cuGetErrorString =
    unsafe extern "C" fn(error: CUresult, text: *mut *const c_char) -> CUresult;

pub type PFN_cuDeviceGetCount = unsafe extern "C" fn(count: *mut c_int) -> CUresult;
pub type PFN_cuDeviceGet = unsafe extern "C" fn(device: *mut CUdevice, ordinal: c_int) -> CUresult;
pub type PFN_cuDeviceGetName =
    unsafe extern "C" fn(name: *mut c_char, len: c_int, device: CUdevice) -> CUresult;
pub type PFN_cuDeviceTotalMem =
    unsafe extern "C" fn(bytes: *mut usize, device: CUdevice) -> CUresult;
pub type PFN_cuDeviceGetAttribute = unsafe extern "C" fn(
    value: *mut c_int,
    attribute: CUdevice_attribute,
    device: CUdevice,
) -> CUresult;
pub type PFN_cuDeviceGetDefaultMemPool =
    unsafe extern "C" fn(pool: *mut CUmemoryPool, device: CUdevice) -> CUresult;

pub type PFN_cuDevicePrimaryCtxRetain =
    unsafe extern "C" fn(ctx: *mut CUcontext, device: CUdevice) -> CUresult;
pub type PFN_cuDevicePrimaryCtxRelease = unsafe extern "C" fn(device: CUdevice) -> CUresult;
pub type PFN_cuDevicePrimaryCtxGetState =
    unsafe extern "C" fn(device: CUdevice, flags: *mut c_uint, active: *mut c_int) -> CUresult;
pub type PFN_cuDevicePrimaryCtxSetFlags =
    unsafe extern "C" fn(device: CUdevice, flags: c_uint) -> CUresult;
pub type PFN_cuCtxSetCurrent = unsafe extern "C" fn(ctx: CUcontext) -> CUresult;
pub type PFN_cuCtxGetCurrent = unsafe extern "C" fn(ctx: *mut CUcontext) -> CUresult;
pub type PFN_cuCtxGetFlags = unsafe extern "C" fn(flags: *mut c_uint) -> CUresult;
pub type PFN_cuCtxSynchronize = unsafe extern "C" fn() -> CUresult;
pub type PFN_cuCtxGetStreamPriorityRange =
    unsafe extern "C" fn(least: *mut c_int, greatest: *mut c_int) -> CUresult;

pub type PFN_cuStreamCreate =
    unsafe extern "C" fn(stream: *mut CUstream, flags: c_uint) -> CUresult;
pub type PFN_cuStreamCreateWithPriority =
    unsafe extern "C" fn(stream: *mut CUstream, flags: c_uint, priority: c_int) -> CUresult;
pub type PFN_cuStreamDestroy = unsafe extern "C" fn(stream: CUstream) -> CUresult;
pub type PFN_cuStreamSynchronize = unsafe extern "C" fn(stream: CUstream) -> CUresult;
pub type PFN_cuStreamQuery = unsafe extern "C" fn(stream: CUstream) -> CUresult;
pub type PFN_cuStreamWaitEvent =
    unsafe extern "C" fn(stream: CUstream, event: CUevent, flags: c_uint) -> CUresult;
pub type PFN_cuStreamGetFlags =
    unsafe extern "C" fn(stream: CUstream, flags: *mut c_uint) -> CUresult;
pub type PFN_cuStreamGetPriority =
    unsafe extern "C" fn(stream: CUstream, priority: *mut c_int) -> CUresult;
pub type PFN_cuStreamGetId = unsafe extern "C" fn(stream: CUstream, id: *mut u64) -> CUresult;
pub type PFN_cuStreamGetCtx =
    unsafe extern "C" fn(stream: CUstream, ctx: *mut CUcontext) -> CUresult;
pub type PFN_cuStreamGetDevice =
    unsafe extern "C" fn(stream: CUstream, device: *mut CUdevice) -> CUresult;
pub type PFN_cuLaunchHostFunc =
    unsafe extern "C" fn(stream: CUstream, f: CUhostFn, user_data: *mut c_void) -> CUresult;
pub type PFN_cuStreamAddCallback = unsafe extern "C" fn(
    stream: CUstream,
    callback: CUstreamCallback,
    user_data: *mut c_void,
    flags: c_uint,
) -> CUresult;
pub type PFN_cuStreamCopyAttributes =
    unsafe extern "C" fn(dst: CUstream, src: CUstream) -> CUresult;
pub type PFN_cuStreamGetAttribute = unsafe extern "C" fn(
    stream: CUstream,
    attribute: CUlaunchAttributeID,
    value: *mut CUlaunchAttributeValue,
) -> CUresult;
pub type PFN_cuStreamSetAttribute = unsafe extern "C" fn(
    stream: CUstream,
    attribute: CUlaunchAttributeID,
    value: *const CUlaunchAttributeValue,
) -> CUresult;
pub type PFN_cuStreamAttachMemAsync = unsafe extern "C" fn(
    stream: CUstream,
    ptr: CUdeviceptr,
    length: usize,
    flags: c_uint,
) -> CUresult;
pub type PFN_cuStreamWriteValue32 = unsafe extern "C" fn(
    stream: CUstream,
    addr: CUdeviceptr,
    value: u32,
    flags: c_uint,
) -> CUresult;
pub type PFN_cuStreamWriteValue64 = unsafe extern "C" fn(
    stream: CUstream,
    addr: CUdeviceptr,
    value: u64,
    flags: c_uint,
) -> CUresult;
pub type PFN_cuStreamWaitValue32 = unsafe extern "C" fn(
    stream: CUstream,
    addr: CUdeviceptr,
    value: u32,
    flags: c_uint,
) -> CUresult;
pub type PFN_cuStreamWaitValue64 = unsafe extern "C" fn(
    stream: CUstream,
    addr: CUdeviceptr,
    value: u64,
    flags: c_uint,
) -> CUresult;
pub type PFN_cuStreamBatchMemOp = unsafe extern "C" fn(
    stream: CUstream,
    count: c_uint,
    params: *mut CUstreamBatchMemOpParams,
    flags: c_uint,
) -> CUresult;
pub type PFN_cuStreamBeginCapture =
    unsafe extern "C" fn(stream: CUstream, mode: CUstreamCaptureMode) -> CUresult;
pub type PFN_cuStreamEndCapture =
    unsafe extern "C" fn(stream: CUstream, graph: *mut CUgraph) -> CUresult;
pub type PFN_cuStreamIsCapturing =
    unsafe extern "C" fn(stream: CUstream, status: *mut CUstreamCaptureStatus) -> CUresult;
pub type PFN_cuStreamGetCaptureInfo = unsafe extern "C" fn(
    stream: CUstream,
    status: *mut CUstreamCaptureStatus,
    id: *mut u64,
    graph: *mut CUgraph,
    dependencies: *mut *const CUgraphNode,
    num_dependencies: *mut usize,
) -> CUresult;
pub type PFN_cuThreadExchangeStreamCaptureMode =
    unsafe extern "C" fn(mode: *mut CUstreamCaptureMode) -> CUresult;

pub type PFN_cuEventCreate = unsafe extern "C" fn(event: *mut CUevent, flags: c_uint) -> CUresult;
pub type PFN_cuEventDestroy = unsafe extern "C" fn(event: CUevent) -> CUresult;
pub type PFN_cuEventRecord = unsafe extern "C" fn(event: CUevent, stream: CUstream) -> CUresult;
pub type PFN_cuEventQuery = unsafe extern "C" fn(event: CUevent) -> CUresult;
pub type PFN_cuEventSynchronize = unsafe extern "C" fn(event: CUevent) -> CUresult;
pub type PFN_cuEventElapsedTime =
    unsafe extern "C" fn(ms: *mut f32, start: CUevent, end: CUevent) -> CUresult;

pub type PFN_cuMemAlloc = unsafe extern "C" fn(ptr: *mut CUdeviceptr, bytes: usize) -> CUresult;
pub type PFN_cuMemFree = unsafe extern "C" fn(ptr: CUdeviceptr) -> CUresult;
/// `CUipcMemHandle`: 64 opaque bytes naming a `cuMemAlloc` allocation to other processes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CUipcMemHandle {
    /// The handle's bytes, as the driver wrote them.
    pub reserved: [u8; 64],
}
/// `cuIpcOpenMemHandle` flag: enable peer access lazily where the memory lives on another
/// device.
pub const CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS: c_uint = 0x1;
pub type PFN_cuIpcGetMemHandle =
    unsafe extern "C" fn(handle: *mut CUipcMemHandle, ptr: CUdeviceptr) -> CUresult;
pub type PFN_cuIpcOpenMemHandle =
    unsafe extern "C" fn(ptr: *mut CUdeviceptr, handle: CUipcMemHandle, flags: c_uint) -> CUresult;
pub type PFN_cuIpcCloseMemHandle = unsafe extern "C" fn(ptr: CUdeviceptr) -> CUresult;
pub type PFN_cuMemcpyDtoH =
    unsafe extern "C" fn(dst: *mut c_void, src: CUdeviceptr, bytes: usize) -> CUresult;
pub type PFN_cuMemsetD32 =
    unsafe extern "C" fn(dst: CUdeviceptr, value: u32, count: usize) -> CUresult;
pub type PFN_cuMemAllocManaged =
    unsafe extern "C" fn(ptr: *mut CUdeviceptr, bytes: usize, flags: c_uint) -> CUresult;
pub type PFN_cuMemHostAlloc =
    unsafe extern "C" fn(ptr: *mut *mut c_void, bytes: usize, flags: c_uint) -> CUresult;
pub type PFN_cuMemHostGetDevicePointer =
    unsafe extern "C" fn(dptr: *mut CUdeviceptr, host: *mut c_void, flags: c_uint) -> CUresult;
pub type PFN_cuMemFreeHost = unsafe extern "C" fn(ptr: *mut c_void) -> CUresult;
pub type PFN_cuMemHostRegister =
    unsafe extern "C" fn(ptr: *mut c_void, bytes: usize, flags: c_uint) -> CUresult;
pub type PFN_cuMemHostUnregister = unsafe extern "C" fn(ptr: *mut c_void) -> CUresult;
pub type PFN_cuMemGetInfo = unsafe extern "C" fn(free: *mut usize, total: *mut usize) -> CUresult;
pub type PFN_cuMemcpyHtoDAsync = unsafe extern "C" fn(
    dst: CUdeviceptr,
    src: *const c_void,
    bytes: usize,
    stream: CUstream,
) -> CUresult;
pub type PFN_cuMemcpyDtoHAsync = unsafe extern "C" fn(
    dst: *mut c_void,
    src: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) -> CUresult;
pub type PFN_cuMemcpyDtoDAsync = unsafe extern "C" fn(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) -> CUresult;
/// `cuMemcpyAsync`: a copy between unified addresses, whichever device (or host) holds them.
pub type PFN_cuMemcpyAsync = unsafe extern "C" fn(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) -> CUresult;
pub type PFN_cuMemcpyPeerAsync = unsafe extern "C" fn(
    dst: CUdeviceptr,
    dst_ctx: CUcontext,
    src: CUdeviceptr,
    src_ctx: CUcontext,
    bytes: usize,
    stream: CUstream,
) -> CUresult;
pub type PFN_cuDeviceCanAccessPeer =
    unsafe extern "C" fn(can_access: *mut c_int, dev: CUdevice, peer: CUdevice) -> CUresult;
pub type PFN_cuCtxEnablePeerAccess =
    unsafe extern "C" fn(peer_ctx: CUcontext, flags: c_uint) -> CUresult;
pub type PFN_cuMemsetD8 =
    unsafe extern "C" fn(dst: CUdeviceptr, value: u8, count: usize) -> CUresult;
pub type PFN_cuMemsetD8Async =
    unsafe extern "C" fn(dst: CUdeviceptr, value: u8, count: usize, stream: CUstream) -> CUresult;
pub type PFN_cuMemsetD32Async =
    unsafe extern "C" fn(dst: CUdeviceptr, value: u32, count: usize, stream: CUstream) -> CUresult;
pub type PFN_cuMemAllocAsync =
    unsafe extern "C" fn(ptr: *mut CUdeviceptr, bytes: usize, stream: CUstream) -> CUresult;
pub type PFN_cuMemAllocFromPoolAsync = unsafe extern "C" fn(
    ptr: *mut CUdeviceptr,
    bytes: usize,
    pool: CUmemoryPool,
    stream: CUstream,
) -> CUresult;
pub type PFN_cuMemFreeAsync = unsafe extern "C" fn(ptr: CUdeviceptr, stream: CUstream) -> CUresult;
pub type PFN_cuMemPoolSetAttribute = unsafe extern "C" fn(
    pool: CUmemoryPool,
    attribute: CUmemPool_attribute,
    value: *mut c_void,
) -> CUresult;
pub type PFN_cuMemPoolGetAttribute = unsafe extern "C" fn(
    pool: CUmemoryPool,
    attribute: CUmemPool_attribute,
    value: *mut c_void,
) -> CUresult;
pub type PFN_cuMemPoolTrimTo = unsafe extern "C" fn(pool: CUmemoryPool, keep: usize) -> CUresult;

pub type PFN_cuModuleLoadData =
    unsafe extern "C" fn(module: *mut CUmodule, image: *const c_void) -> CUresult;
pub type PFN_cuModuleLoadDataEx = unsafe extern "C" fn(
    module: *mut CUmodule,
    image: *const c_void,
    num_options: c_uint,
    options: *mut CUjit_option,
    values: *mut *mut c_void,
) -> CUresult;
pub type PFN_cuModuleUnload = unsafe extern "C" fn(module: CUmodule) -> CUresult;
pub type PFN_cuModuleGetFunction =
    unsafe extern "C" fn(f: *mut CUfunction, module: CUmodule, name: *const c_char) -> CUresult;
pub type PFN_cuFuncGetAttribute = unsafe extern "C" fn(
    value: *mut c_int,
    attribute: CUfunction_attribute,
    f: CUfunction,
) -> CUresult;
pub type PFN_cuFuncSetAttribute =
    unsafe extern "C" fn(f: CUfunction, attribute: CUfunction_attribute, value: c_int) -> CUresult;
pub type PFN_cuLaunchKernel = unsafe extern "C" fn(
    f: CUfunction,
    grid_x: c_uint,
    grid_y: c_uint,
    grid_z: c_uint,
    block_x: c_uint,
    block_y: c_uint,
    block_z: c_uint,
    shared_bytes: c_uint,
    stream: CUstream,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult;

pub type PFN_cuGraphCreate = unsafe extern "C" fn(graph: *mut CUgraph, flags: c_uint) -> CUresult;
pub type PFN_cuGraphDestroy = unsafe extern "C" fn(graph: CUgraph) -> CUresult;
pub type PFN_cuGraphGetNodes =
    unsafe extern "C" fn(graph: CUgraph, nodes: *mut CUgraphNode, count: *mut usize) -> CUresult;
pub type PFN_cuGraphNodeGetType =
    unsafe extern "C" fn(node: CUgraphNode, kind: *mut CUgraphNodeType) -> CUresult;
pub type PFN_cuGraphKernelNodeGetParams =
    unsafe extern "C" fn(node: CUgraphNode, params: *mut CUDA_KERNEL_NODE_PARAMS) -> CUresult;
pub type PFN_cuGraphAddKernelNode = unsafe extern "C" fn(
    node: *mut CUgraphNode,
    graph: CUgraph,
    dependencies: *const CUgraphNode,
    num_dependencies: usize,
    params: *const CUDA_KERNEL_NODE_PARAMS,
) -> CUresult;
pub type PFN_cuGraphAddEmptyNode = unsafe extern "C" fn(
    node: *mut CUgraphNode,
    graph: CUgraph,
    dependencies: *const CUgraphNode,
    num_dependencies: usize,
) -> CUresult;
pub type PFN_cuGraphInstantiateWithFlags =
    unsafe extern "C" fn(exec: *mut CUgraphExec, graph: CUgraph, flags: u64) -> CUresult;
pub type PFN_cuGraphExecDestroy = unsafe extern "C" fn(exec: CUgraphExec) -> CUresult;
pub type PFN_cuGraphLaunch = unsafe extern "C" fn(exec: CUgraphExec, stream: CUstream) -> CUresult;
pub type PFN_cuGraphUpload = unsafe extern "C" fn(exec: CUgraphExec, stream: CUstream) -> CUresult;
pub type PFN_cuGraphExecKernelNodeSetParams = unsafe extern "C" fn(
    exec: CUgraphExec,
    node: CUgraphNode,
    params: *const CUDA_KERNEL_NODE_PARAMS,
) -> CUresult;
pub type PFN_cuGraphExecUpdate = unsafe extern "C" fn(
    exec: CUgraphExec,
    graph: CUgraph,
    info: *mut CUgraphExecUpdateResultInfo,
) -> CUresult;
pub type PFN_cuGraphDebugDotPrint =
    unsafe extern "C" fn(graph: CUgraph, path: *const c_char, flags: c_uint) -> CUresult;
pub type PFN_cuGraphAddDependencies = unsafe extern "C" fn(
    graph: CUgraph,
    from: *const CUgraphNode,
    to: *const CUgraphNode,
    num_dependencies: usize,
) -> CUresult;

// Graphs built node by node (graph/build/) and conditional nodes (CUDA 12.3+). Layouts from
// the CUDA 12.3-13.0 `cuda.h`, asserted in the tests below.

/// `CUmemorytype`.
pub const CU_MEMORYTYPE_HOST: c_uint = 1;
pub const CU_MEMORYTYPE_DEVICE: c_uint = 2;
pub const CU_MEMORYTYPE_UNIFIED: c_uint = 4;
/// `CUgraphConditionalHandle`.
pub type CUgraphConditionalHandle = u64;
/// `CUgraphConditionalNodeType`.
pub const CU_GRAPH_COND_TYPE_IF: c_uint = 0;
pub const CU_GRAPH_COND_TYPE_WHILE: c_uint = 1;
/// `CU_GRAPH_COND_TYPE_SWITCH` (CUDA 12.8): body `n` runs when the value is `n`.
pub const CU_GRAPH_COND_TYPE_SWITCH: c_uint = 2;
/// `CU_GRAPH_COND_ASSIGN_DEFAULT`: the handle takes its default value at each launch.
pub const CU_GRAPH_COND_ASSIGN_DEFAULT: c_uint = 1;

/// `CUDA_MEMCPY3D_v2` (also `CUDA_MEMCPY3D`): 200 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CUDA_MEMCPY3D {
    pub srcXInBytes: usize,
    pub srcY: usize,
    pub srcZ: usize,
    pub srcLOD: usize,
    pub srcMemoryType: c_uint,
    pub srcHost: *const c_void,
    pub srcDevice: CUdeviceptr,
    pub srcArray: *mut c_void,
    pub reserved0: *mut c_void,
    pub srcPitch: usize,
    pub srcHeight: usize,
    pub dstXInBytes: usize,
    pub dstY: usize,
    pub dstZ: usize,
    pub dstLOD: usize,
    pub dstMemoryType: c_uint,
    pub dstHost: *mut c_void,
    pub dstDevice: CUdeviceptr,
    pub dstArray: *mut c_void,
    pub reserved1: *mut c_void,
    pub dstPitch: usize,
    pub dstHeight: usize,
    pub WidthInBytes: usize,
    pub Height: usize,
    pub Depth: usize,
}

/// `CUDA_MEMSET_NODE_PARAMS_v1`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CUDA_MEMSET_NODE_PARAMS {
    pub dst: CUdeviceptr,
    pub pitch: usize,
    pub value: c_uint,
    pub elementSize: c_uint,
    pub width: usize,
    pub height: usize,
}

/// `CUDA_HOST_NODE_PARAMS_v1`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CUDA_HOST_NODE_PARAMS {
    pub fn_: CUhostFn,
    pub userData: *mut c_void,
}

/// `CUDA_BATCH_MEM_OP_NODE_PARAMS_v1`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CUDA_BATCH_MEM_OP_NODE_PARAMS {
    pub ctx: CUcontext,
    pub count: c_uint,
    pub paramArray: *mut CUstreamBatchMemOpParams,
    pub flags: c_uint,
}

/// `CUgraphEdgeData` (CUDA 12.3): only ever passed as a null pointer (default edges).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CUgraphEdgeData {
    pub from_port: u8,
    pub to_port: u8,
    pub type_: u8,
    pub reserved: [u8; 5],
}

/// `CUDA_CONDITIONAL_NODE_PARAMS` (CUDA 12.3): 32 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CUDA_CONDITIONAL_NODE_PARAMS {
    pub handle: CUgraphConditionalHandle,
    pub type_: c_uint,
    /// Number of body graphs: 1 for WHILE and for IF without an else branch.
    pub size: c_uint,
    /// Written by the driver: a driver-owned array of `size` body graphs.
    pub phGraph_out: *mut CUgraph,
    pub ctx: CUcontext,
}

/// The union of `CUgraphNodeParams`; only the member we use is declared, `reserved1` fixes
/// its size at 232 bytes.
#[repr(C)]
#[derive(Clone, Copy)]
pub union CUgraphNodeParams_u {
    pub reserved1: [i64; 29],
    pub conditional: CUDA_CONDITIONAL_NODE_PARAMS,
}

/// `CUgraphNodeParams` (CUDA 12.2): 256 bytes; every byte past the used member must be zero.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CUgraphNodeParams {
    pub type_: CUgraphNodeType,
    pub reserved0: [c_int; 3],
    pub u: CUgraphNodeParams_u,
    pub reserved2: i64,
}

const _: () = assert!(std::mem::size_of::<CUgraphNodeParams>() == 256);
const _: () = assert!(std::mem::offset_of!(CUgraphNodeParams, u) == 16);
const _: () = assert!(std::mem::offset_of!(CUgraphNodeParams, reserved2) == 248);
const _: () = assert!(std::mem::size_of::<CUDA_CONDITIONAL_NODE_PARAMS>() == 32);
const _: () = assert!(std::mem::size_of::<CUDA_MEMCPY3D>() == 200);
const _: () = assert!(std::mem::size_of::<CUDA_MEMSET_NODE_PARAMS>() == 40);
const _: () = assert!(std::mem::size_of::<CUDA_BATCH_MEM_OP_NODE_PARAMS>() == 32);
const _: () = assert!(std::mem::size_of::<CUgraphEdgeData>() == 8);

pub type PFN_cuGraphAddMemcpyNode = unsafe extern "C" fn(
    node: *mut CUgraphNode,
    graph: CUgraph,
    dependencies: *const CUgraphNode,
    num_dependencies: usize,
    params: *const CUDA_MEMCPY3D,
    ctx: CUcontext,
) -> CUresult;
pub type PFN_cuGraphAddMemsetNode = unsafe extern "C" fn(
    node: *mut CUgraphNode,
    graph: CUgraph,
    dependencies: *const CUgraphNode,
    num_dependencies: usize,
    params: *const CUDA_MEMSET_NODE_PARAMS,
    ctx: CUcontext,
) -> CUresult;
pub type PFN_cuGraphAddHostNode = unsafe extern "C" fn(
    node: *mut CUgraphNode,
    graph: CUgraph,
    dependencies: *const CUgraphNode,
    num_dependencies: usize,
    params: *const CUDA_HOST_NODE_PARAMS,
) -> CUresult;
pub type PFN_cuGraphAddBatchMemOpNode = unsafe extern "C" fn(
    node: *mut CUgraphNode,
    graph: CUgraph,
    dependencies: *const CUgraphNode,
    num_dependencies: usize,
    params: *const CUDA_BATCH_MEM_OP_NODE_PARAMS,
) -> CUresult;
pub type PFN_cuGraphAddChildGraphNode = unsafe extern "C" fn(
    node: *mut CUgraphNode,
    graph: CUgraph,
    dependencies: *const CUgraphNode,
    num_dependencies: usize,
    child: CUgraph,
) -> CUresult;
/// `cuGraphAddEventRecordNode` and `cuGraphAddEventWaitNode` (CUDA 11.1).
pub type PFN_cuGraphAddEventNode = unsafe extern "C" fn(
    node: *mut CUgraphNode,
    graph: CUgraph,
    dependencies: *const CUgraphNode,
    num_dependencies: usize,
    event: CUevent,
) -> CUresult;
pub type PFN_cuGraphClone =
    unsafe extern "C" fn(clone: *mut CUgraph, original: CUgraph) -> CUresult;
/// `cuGraphNodeFindInClone` (CUDA 10.0): the node of a clone that an original node became.
pub type PFN_cuGraphNodeFindInClone =
    unsafe extern "C" fn(node: *mut CUgraphNode, original: CUgraphNode, clone: CUgraph) -> CUresult;
/// `cuGraphGetEdges` as of CUDA 10.0 (no edge data).
pub type PFN_cuGraphGetEdges = unsafe extern "C" fn(
    graph: CUgraph,
    from: *mut CUgraphNode,
    to: *mut CUgraphNode,
    num_edges: *mut usize,
) -> CUresult;
/// `cuGraphAddNode_v2` (CUDA 12.3): the generic form, the only one for conditional nodes.
pub type PFN_cuGraphAddNode = unsafe extern "C" fn(
    node: *mut CUgraphNode,
    graph: CUgraph,
    dependencies: *const CUgraphNode,
    dependency_data: *const CUgraphEdgeData,
    num_dependencies: usize,
    params: *mut CUgraphNodeParams,
) -> CUresult;
/// `cuGraphConditionalHandleCreate` (CUDA 12.3).
pub type PFN_cuGraphConditionalHandleCreate = unsafe extern "C" fn(
    handle: *mut CUgraphConditionalHandle,
    graph: CUgraph,
    ctx: CUcontext,
    default_launch_value: c_uint,
    flags: c_uint,
) -> CUresult;
/// `cuStreamBeginCaptureToGraph` (CUDA 12.3).
pub type PFN_cuStreamBeginCaptureToGraph = unsafe extern "C" fn(
    stream: CUstream,
    graph: CUgraph,
    dependencies: *const CUgraphNode,
    dependency_data: *const CUgraphEdgeData,
    num_dependencies: usize,
    mode: CUstreamCaptureMode,
) -> CUresult;
/// `cuFuncGetParamInfo` (CUDA 12.4): a kernel parameter's offset and size.
pub type PFN_cuFuncGetParamInfo = unsafe extern "C" fn(
    f: CUfunction,
    index: usize,
    offset: *mut usize,
    size: *mut usize,
) -> CUresult;

#[cfg(test)]
mod tests {
    use super::*;

    // The layouts the driver reads; a wrong size here is silent memory corruption there.
    #[test]
    fn struct_layouts_match_the_c_header() {
        assert_eq!(std::mem::size_of::<CUstreamBatchMemOpParams>(), 48);
        assert_eq!(std::mem::size_of::<CUstreamMemOpValueParams>(), 40);
        assert_eq!(std::mem::offset_of!(CUstreamMemOpValueParams, address), 8);
        assert_eq!(std::mem::offset_of!(CUstreamMemOpValueParams, value64), 16);
        assert_eq!(std::mem::offset_of!(CUstreamMemOpValueParams, flags), 24);
        assert_eq!(std::mem::offset_of!(CUstreamMemOpValueParams, alias), 32);
        assert_eq!(std::mem::size_of::<CUlaunchAttributeValue>(), 64);
        assert_eq!(std::mem::size_of::<CUaccessPolicyWindow>(), 32);
        assert_eq!(std::mem::size_of::<CUDA_KERNEL_NODE_PARAMS>(), 72);
        assert_eq!(std::mem::size_of::<CUgraphExecUpdateResultInfo>(), 24);
        assert_eq!(std::mem::offset_of!(CUDA_MEMCPY3D, srcMemoryType), 32);
        assert_eq!(std::mem::offset_of!(CUDA_MEMCPY3D, srcHost), 40);
        assert_eq!(std::mem::offset_of!(CUDA_MEMCPY3D, dstXInBytes), 88);
        assert_eq!(std::mem::offset_of!(CUDA_MEMCPY3D, dstMemoryType), 120);
        assert_eq!(std::mem::offset_of!(CUDA_MEMCPY3D, dstHost), 128);
        assert_eq!(std::mem::offset_of!(CUDA_MEMCPY3D, WidthInBytes), 176);
        assert_eq!(std::mem::offset_of!(CUDA_MEMSET_NODE_PARAMS, value), 16);
        assert_eq!(std::mem::offset_of!(CUDA_MEMSET_NODE_PARAMS, width), 24);
        assert_eq!(std::mem::size_of::<CUDA_HOST_NODE_PARAMS>(), 16);
        assert_eq!(
            std::mem::offset_of!(CUDA_BATCH_MEM_OP_NODE_PARAMS, count),
            8
        );
        assert_eq!(
            std::mem::offset_of!(CUDA_BATCH_MEM_OP_NODE_PARAMS, paramArray),
            16
        );
        assert_eq!(
            std::mem::offset_of!(CUDA_BATCH_MEM_OP_NODE_PARAMS, flags),
            24
        );
        assert_eq!(std::mem::offset_of!(CUDA_CONDITIONAL_NODE_PARAMS, type_), 8);
        assert_eq!(std::mem::offset_of!(CUDA_CONDITIONAL_NODE_PARAMS, size), 12);
        assert_eq!(
            std::mem::offset_of!(CUDA_CONDITIONAL_NODE_PARAMS, phGraph_out),
            16
        );
        assert_eq!(std::mem::offset_of!(CUDA_CONDITIONAL_NODE_PARAMS, ctx), 24);
        assert_eq!(std::mem::size_of::<CUgraphNodeParams_u>(), 232);
    }

    #[test]
    fn unknown_result_codes_stay_valid_and_print_their_number() {
        let future = CUresult(12345);
        assert_eq!(future.known_name(), None);
        assert_eq!(format!("{future:?}"), "CUresult(12345)");
        assert_eq!(
            format!("{:?}", CUresult::CUDA_ERROR_ILLEGAL_ADDRESS),
            "CUDA_ERROR_ILLEGAL_ADDRESS"
        );
    }
}
