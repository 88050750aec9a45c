//! The driver's function table: every entry point we call, with its `sys` type and the CUDA
//! version whose ABI `cuGetProcAddress` is asked for. One list; adding an entry point is one
//! line here and its type in [`crate::sys`].

use std::ffi::c_void;

use libloading::Library;

use super::{ABI_VERSION, Resolver, check_raw};
use crate::error::Result;
use crate::sys;

/// Declares the function table: required entry points fail the load when missing; optional
/// ones are `None` and become [`Error::Unsupported`](crate::Error::Unsupported) when called.
macro_rules! driver_table {
    (
        required { $($name:ident: $ty:ident @ $ver:expr,)* }
        optional { $($oname:ident: $oty:ident @ $over:expr,)* }
    ) => {
        /// The loaded driver: its version and every entry point we call.
        #[allow(non_snake_case)]
        pub(crate) struct Driver {
            /// `cuDriverGetVersion`, e.g. 13000 for CUDA 13.0.
            pub(crate) version: i32,
            $(pub(crate) $name: sys::$ty,)*
            $(pub(crate) $oname: Option<sys::$oty>,)*
            // Keeps the library mapped for as long as the pointers above are used: forever.
            _library: Library,
        }

        impl Driver {
            /// Resolves every entry point through `cuGetProcAddress`.
            ///
            /// # Safety
            /// `resolver` must be the library's real `cuGetProcAddress`.
            #[allow(non_snake_case)]
            pub(super) unsafe fn resolve(library: Library, resolver: &Resolver) -> Result<Driver> {
                $(
                    // SAFETY: `sys` declares the C signature of the `@ $ver` ABI of this
                    // symbol, which is the variant cuGetProcAddress returns for that version.
                    let $name = unsafe {
                        std::mem::transmute::<*mut c_void, sys::$ty>(
                            resolver.required(stringify!($name), $ver)?,
                        )
                    };
                )*
                $(
                    // SAFETY: as above.
                    let $oname = resolver.optional(stringify!($oname), $over).map(|p| unsafe {
                        std::mem::transmute::<*mut c_void, sys::$oty>(p)
                    });
                )*
                let mut driver = Driver { version: 0, $($name,)* $($oname,)* _library: library };
                let mut version = 0;
                // SAFETY: a valid out-pointer; cuDriverGetVersion works before cuInit.
                check_raw("cuDriverGetVersion", unsafe { (driver.cuDriverGetVersion)(&mut version) })?;
                driver.version = version;
                Ok(driver)
            }
        }
    };
}

driver_table! {
    required {
        cuInit: PFN_cuInit @ ABI_VERSION,
        cuDriverGetVersion: PFN_cuDriverGetVersion @ ABI_VERSION,
        cuGetErrorName: PFN_cuGetErrorName @ ABI_VERSION,
        cuGetErrorString: PFN_cuGetErrorString @ ABI_VERSION,
        cuDeviceGetCount: PFN_cuDeviceGetCount @ ABI_VERSION,
        cuDeviceGet: PFN_cuDeviceGet @ ABI_VERSION,
        cuDeviceGetName: PFN_cuDeviceGetName @ ABI_VERSION,
        cuDeviceTotalMem: PFN_cuDeviceTotalMem @ ABI_VERSION,
        cuDeviceGetAttribute: PFN_cuDeviceGetAttribute @ ABI_VERSION,
        cuDeviceGetDefaultMemPool: PFN_cuDeviceGetDefaultMemPool @ ABI_VERSION,
        cuDevicePrimaryCtxRetain: PFN_cuDevicePrimaryCtxRetain @ ABI_VERSION,
        cuDevicePrimaryCtxRelease: PFN_cuDevicePrimaryCtxRelease @ ABI_VERSION,
        cuDevicePrimaryCtxGetState: PFN_cuDevicePrimaryCtxGetState @ ABI_VERSION,
        cuDevicePrimaryCtxSetFlags: PFN_cuDevicePrimaryCtxSetFlags @ ABI_VERSION,
        cuCtxSetCurrent: PFN_cuCtxSetCurrent @ ABI_VERSION,
        cuCtxGetCurrent: PFN_cuCtxGetCurrent @ ABI_VERSION,
        cuCtxSynchronize: PFN_cuCtxSynchronize @ ABI_VERSION,
        cuCtxGetFlags: PFN_cuCtxGetFlags @ ABI_VERSION,
        cuCtxGetStreamPriorityRange: PFN_cuCtxGetStreamPriorityRange @ ABI_VERSION,
        cuStreamCreate: PFN_cuStreamCreate @ ABI_VERSION,
        cuStreamCreateWithPriority: PFN_cuStreamCreateWithPriority @ ABI_VERSION,
        cuStreamDestroy: PFN_cuStreamDestroy @ ABI_VERSION,
        cuStreamSynchronize: PFN_cuStreamSynchronize @ ABI_VERSION,
        cuStreamQuery: PFN_cuStreamQuery @ ABI_VERSION,
        cuStreamWaitEvent: PFN_cuStreamWaitEvent @ ABI_VERSION,
        cuStreamGetFlags: PFN_cuStreamGetFlags @ ABI_VERSION,
        cuStreamGetPriority: PFN_cuStreamGetPriority @ ABI_VERSION,
        cuStreamGetId: PFN_cuStreamGetId @ ABI_VERSION,
        cuLaunchHostFunc: PFN_cuLaunchHostFunc @ ABI_VERSION,
        cuStreamAddCallback: PFN_cuStreamAddCallback @ ABI_VERSION,
        cuStreamCopyAttributes: PFN_cuStreamCopyAttributes @ ABI_VERSION,
        cuStreamGetAttribute: PFN_cuStreamGetAttribute @ ABI_VERSION,
        cuStreamSetAttribute: PFN_cuStreamSetAttribute @ ABI_VERSION,
        cuStreamAttachMemAsync: PFN_cuStreamAttachMemAsync @ ABI_VERSION,
        cuStreamWriteValue32: PFN_cuStreamWriteValue32 @ ABI_VERSION,
        cuStreamWriteValue64: PFN_cuStreamWriteValue64 @ ABI_VERSION,
        cuStreamWaitValue32: PFN_cuStreamWaitValue32 @ ABI_VERSION,
        cuStreamWaitValue64: PFN_cuStreamWaitValue64 @ ABI_VERSION,
        cuStreamBatchMemOp: PFN_cuStreamBatchMemOp @ ABI_VERSION,
        cuStreamBeginCapture: PFN_cuStreamBeginCapture @ ABI_VERSION,
        cuStreamEndCapture: PFN_cuStreamEndCapture @ ABI_VERSION,
        cuStreamGetCaptureInfo: PFN_cuStreamGetCaptureInfo @ ABI_VERSION,
        cuThreadExchangeStreamCaptureMode: PFN_cuThreadExchangeStreamCaptureMode @ ABI_VERSION,
        cuEventCreate: PFN_cuEventCreate @ ABI_VERSION,
        cuEventDestroy: PFN_cuEventDestroy @ ABI_VERSION,
        cuEventRecord: PFN_cuEventRecord @ ABI_VERSION,
        cuEventQuery: PFN_cuEventQuery @ ABI_VERSION,
        cuEventSynchronize: PFN_cuEventSynchronize @ ABI_VERSION,
        cuEventElapsedTime: PFN_cuEventElapsedTime @ ABI_VERSION,
        cuMemAlloc: PFN_cuMemAlloc @ ABI_VERSION,
        cuMemFree: PFN_cuMemFree @ ABI_VERSION,
        cuMemAllocManaged: PFN_cuMemAllocManaged @ ABI_VERSION,
        cuMemHostAlloc: PFN_cuMemHostAlloc @ ABI_VERSION,
        cuMemFreeHost: PFN_cuMemFreeHost @ ABI_VERSION,
        cuMemHostRegister: PFN_cuMemHostRegister @ ABI_VERSION,
        cuMemHostUnregister: PFN_cuMemHostUnregister @ ABI_VERSION,
        cuMemHostGetDevicePointer: PFN_cuMemHostGetDevicePointer @ ABI_VERSION,
        cuMemGetInfo: PFN_cuMemGetInfo @ ABI_VERSION,
        cuMemcpyHtoDAsync: PFN_cuMemcpyHtoDAsync @ ABI_VERSION,
        cuMemcpyDtoHAsync: PFN_cuMemcpyDtoHAsync @ ABI_VERSION,
        cuMemcpyDtoDAsync: PFN_cuMemcpyDtoDAsync @ ABI_VERSION,
        cuMemcpyAsync: PFN_cuMemcpyAsync @ ABI_VERSION,
        cuMemsetD8: PFN_cuMemsetD8 @ ABI_VERSION,
        cuMemsetD8Async: PFN_cuMemsetD8Async @ ABI_VERSION,
        cuMemsetD32Async: PFN_cuMemsetD32Async @ ABI_VERSION,
        cuMemAllocAsync: PFN_cuMemAllocAsync @ ABI_VERSION,
        cuMemAllocFromPoolAsync: PFN_cuMemAllocFromPoolAsync @ ABI_VERSION,
        cuMemFreeAsync: PFN_cuMemFreeAsync @ ABI_VERSION,
        cuMemPoolSetAttribute: PFN_cuMemPoolSetAttribute @ ABI_VERSION,
        cuMemPoolGetAttribute: PFN_cuMemPoolGetAttribute @ ABI_VERSION,
        cuMemPoolTrimTo: PFN_cuMemPoolTrimTo @ ABI_VERSION,
        cuModuleLoadDataEx: PFN_cuModuleLoadDataEx @ ABI_VERSION,
        cuModuleUnload: PFN_cuModuleUnload @ ABI_VERSION,
        cuModuleGetFunction: PFN_cuModuleGetFunction @ ABI_VERSION,
        cuFuncGetAttribute: PFN_cuFuncGetAttribute @ ABI_VERSION,
        cuFuncSetAttribute: PFN_cuFuncSetAttribute @ ABI_VERSION,
        cuLaunchKernel: PFN_cuLaunchKernel @ ABI_VERSION,
        cuGraphCreate: PFN_cuGraphCreate @ ABI_VERSION,
        cuGraphDestroy: PFN_cuGraphDestroy @ ABI_VERSION,
        cuGraphGetNodes: PFN_cuGraphGetNodes @ ABI_VERSION,
        cuGraphNodeGetType: PFN_cuGraphNodeGetType @ ABI_VERSION,
        cuGraphKernelNodeGetParams: PFN_cuGraphKernelNodeGetParams @ ABI_VERSION,
        cuGraphAddKernelNode: PFN_cuGraphAddKernelNode @ ABI_VERSION,
        cuGraphAddEmptyNode: PFN_cuGraphAddEmptyNode @ ABI_VERSION,
        cuGraphInstantiateWithFlags: PFN_cuGraphInstantiateWithFlags @ ABI_VERSION,
        cuGraphExecDestroy: PFN_cuGraphExecDestroy @ ABI_VERSION,
        cuGraphLaunch: PFN_cuGraphLaunch @ ABI_VERSION,
        cuGraphUpload: PFN_cuGraphUpload @ ABI_VERSION,
        cuGraphExecKernelNodeSetParams: PFN_cuGraphExecKernelNodeSetParams @ ABI_VERSION,
        cuGraphExecUpdate: PFN_cuGraphExecUpdate @ ABI_VERSION,
        cuGraphDebugDotPrint: PFN_cuGraphDebugDotPrint @ ABI_VERSION,
        cuGraphAddDependencies: PFN_cuGraphAddDependencies @ ABI_VERSION,
        cuGraphAddMemcpyNode: PFN_cuGraphAddMemcpyNode @ ABI_VERSION,
        cuGraphAddMemsetNode: PFN_cuGraphAddMemsetNode @ ABI_VERSION,
        cuGraphAddHostNode: PFN_cuGraphAddHostNode @ ABI_VERSION,
        cuGraphAddBatchMemOpNode: PFN_cuGraphAddBatchMemOpNode @ ABI_VERSION,
        cuGraphAddChildGraphNode: PFN_cuGraphAddChildGraphNode @ ABI_VERSION,
        cuGraphAddEventRecordNode: PFN_cuGraphAddEventNode @ ABI_VERSION,
        cuGraphAddEventWaitNode: PFN_cuGraphAddEventNode @ ABI_VERSION,
        cuGraphClone: PFN_cuGraphClone @ ABI_VERSION,
        cuGraphNodeFindInClone: PFN_cuGraphNodeFindInClone @ ABI_VERSION,
        // The CUDA 10.0 ABI, without edge data (12030 adds a parameter).
        cuGraphGetEdges: PFN_cuGraphGetEdges @ 10000,
    }
    optional {
        // Peer copies and peer access between devices (every CUDA 12/13 driver has them;
        // optional so a single-device program never depends on them).
        cuMemcpyPeerAsync: PFN_cuMemcpyPeerAsync @ ABI_VERSION,
        cuDeviceCanAccessPeer: PFN_cuDeviceCanAccessPeer @ ABI_VERSION,
        cuCtxEnablePeerAccess: PFN_cuCtxEnablePeerAccess @ ABI_VERSION,
        // One-sided windows between processes (`Window`): CUDA IPC handles, and the
        // synchronous copy and memset its teardown handshake uses.
        cuIpcGetMemHandle: PFN_cuIpcGetMemHandle @ ABI_VERSION,
        cuIpcOpenMemHandle: PFN_cuIpcOpenMemHandle @ ABI_VERSION,
        cuIpcCloseMemHandle: PFN_cuIpcCloseMemHandle @ ABI_VERSION,
        cuMemcpyDtoH: PFN_cuMemcpyDtoH @ ABI_VERSION,
        cuMemsetD32: PFN_cuMemsetD32 @ ABI_VERSION,
        // CUDA 12.8.
        cuStreamGetDevice: PFN_cuStreamGetDevice @ 12080,
        // CUDA 12.4.
        cuFuncGetParamInfo: PFN_cuFuncGetParamInfo @ 12040,
        // CUDA 12.3: conditional nodes and capture into an existing graph. `cuGraphAddNode`
        // @ 12030 is `cuGraphAddNode_v2` (with edge data).
        cuGraphAddNode: PFN_cuGraphAddNode @ 12030,
        cuGraphConditionalHandleCreate: PFN_cuGraphConditionalHandleCreate @ 12030,
        cuStreamBeginCaptureToGraph: PFN_cuStreamBeginCaptureToGraph @ 12030,
    }
}
