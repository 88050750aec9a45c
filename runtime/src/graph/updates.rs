//! Batches of in-place kernel-node updates: what scalar setters of a replayed step use.

use crate::cuda;
use crate::error::{Error, Result};
use crate::launch::{CudaArgsOf, KernelArgsFor, LaunchConfig, Signature, TypedKernel, cpu_args};
use crate::stream::mixed;

use super::{CpuExec, ExecBackend, GraphExec, KernelIdentity, KernelNode, NodeId};
use crate::module::{Kernel, KernelBackend};

/// In-place updates of an executable graph's kernel nodes, for the launches that follow:
/// from [`GraphExec::kernel_updates`].
///
/// A batch holds the executable graph exclusively, makes its context current once and checks
/// each kernel's module and each buffer once, the first time a node names it, so updating many
/// nodes costs little more than the driver's own per-node call. Each
/// [`set`](KernelUpdates::set) takes effect when it returns, so a batch needs no ending (and
/// one passed to `mem::forget` loses nothing).
///
/// ```standalone_crate
/// # fn main() -> gpu_pipeline::Result<()> {
/// use gpu_pipeline::{CaptureMode, Context, CpuKernel, DeviceBuffer, LaunchConfig, Module, Stream};
/// fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
///     data[..n as usize].iter_mut().for_each(|x| *x += value);
/// }
/// let ctx = Context::cpu();
/// let stream = Stream::non_blocking(&ctx)?;
/// let module = Module::load_ptx(&ctx, include_str!("../../kernels/test_kernels.ptx"))?;
/// // SAFETY: add_scalar(unsigned n, float value, float* data), as compiled.
/// let add = unsafe { module.function("add_scalar")?.typed::<(u32, f32, &mut [f32])>()? }
///     .with_cpu(CpuKernel::new(add_scalar));
/// let mut x = DeviceBuffer::<f32>::zeros(&stream, 4)?;
/// let cfg = LaunchConfig::new(1u32, 4u32);
/// let graph = stream.capture(CaptureMode::ThreadLocal, |s| {
///     add.launch(s, cfg, (4u32, 1.0f32, &mut x))?;
///     add.launch(s, cfg, (4u32, 1.0f32, &mut x))
/// })?;
/// let mut exec = graph.instantiate()?;
/// // Both nodes add 2.0 from now on, updated in one batch.
/// let mut updates = exec.kernel_updates()?;
/// for node in graph.kernel_nodes()? {
///     updates.set(&node, &add, cfg, (4u32, 2.0f32, &mut x))?;
/// }
/// exec.launch(&stream)?;
/// stream.synchronize()?;
/// assert_eq!(x.to_vec(&stream)?, vec![4.0; 4]);
/// # Ok(()) }
/// ```
pub struct KernelUpdates<'a> {
    source: u64,
    backend: UpdatesBackend<'a>,
}

/// The one backend a batch updates.
enum UpdatesBackend<'a> {
    Cuda(cuda::KernelUpdates<'a>),
    /// The CPU executable graph, whose host-visible memory is recomputed at each `set` (not
    /// when the batch ends: a batch passed to `mem::forget` never ends).
    Cpu(&'a mut CpuExec),
}

impl GraphExec {
    /// Starts a batch of in-place kernel-node updates (see [`KernelUpdates`]): the way to
    /// update many nodes between replays at the driver's speed.
    pub fn kernel_updates(&mut self) -> Result<KernelUpdates<'_>> {
        let backend = match &mut self.backend {
            ExecBackend::Cuda(e) => UpdatesBackend::Cuda(e.kernel_updates()?),
            ExecBackend::Cpu(e) => UpdatesBackend::Cpu(e),
        };
        Ok(KernelUpdates {
            source: self.source,
            backend,
        })
    }
}

impl KernelUpdates<'_> {
    /// Changes the arguments (and geometry) of one kernel node in place, for the next
    /// launches. `node` must come from the graph the executable graph was instantiated from
    /// ([`Graph::kernel_nodes`](super::Graph::kernel_nodes)) and launch `kernel`. New buffers
    /// are kept alive by the executable graph from now on. The kernel's bounds are checked
    /// first ([`TypedKernel::check_bounds`]): arguments that break one are refused with
    /// [`Error::KernelBound`] and the node keeps its previous parameters.
    pub fn set<Sig: Signature + 'static, A: KernelArgsFor<Sig>>(
        &mut self,
        node: &KernelNode,
        kernel: &TypedKernel<Sig>,
        config: LaunchConfig,
        args: A,
    ) -> Result<()> {
        kernel.check_bounds_for(CALL, &args)?;
        // SAFETY: the bounds were checked just above.
        unsafe { self.set_unchecked(node, kernel, config, args) }
    }

    /// [`set`](KernelUpdates::set) without checking the kernel's bounds: for updates whose
    /// arguments were checked already ([`TypedKernel::check_bounds`]), such as many nodes
    /// given the same arguments, checked once, or a pipeline's setters, which check each value
    /// when it is set. Everything else is checked as in `set`.
    ///
    /// # Safety
    ///
    /// `args` must satisfy every bound `kernel` declares (`kernel.check_bounds(&args)` would
    /// return `Ok`): the kernel indexes its buffers as its bounds say, so arguments that break
    /// one let the next launches read or write outside a buffer.
    pub unsafe fn set_unchecked<Sig: Signature + 'static, A: KernelArgsFor<Sig>>(
        &mut self,
        node: &KernelNode,
        kernel: &TypedKernel<Sig>,
        config: LaunchConfig,
        args: A,
    ) -> Result<()> {
        crate::launch::refuse_condition_updates(CALL, &args)?;
        if node.node.graph != self.source {
            return Err(Error::invalid(
                CALL,
                "the node belongs to another graph than the one this was instantiated from",
            ));
        }
        if node.node.scope != 0 {
            return Err(Error::invalid(
                CALL,
                "the node is inside a conditional (`while`/`if`) body, whose nodes are not \
                 updated in place; build the graph again",
            ));
        }
        let k = kernel.kernel();
        // One match decides the backend and whether the node launches this kernel, on
        // references: a generated setter comes here once per node of its graph.
        let launches = match (
            &mut self.backend,
            &node.node.id,
            &node.kernel,
            &k.inner.backend,
        ) {
            (
                UpdatesBackend::Cuda(batch),
                NodeId::Cuda(raw),
                KernelIdentity::Cuda(id),
                KernelBackend::Cuda(function),
            ) => {
                if *id != function.id() {
                    return Err(not_launched(CALL, k));
                }
                // The geometry the node was captured with was validated then.
                if !config.same_as(&node.config) {
                    k.validate_for(CALL, &config)?;
                }
                return batch.set(raw, function, &config, &CudaArgsOf(&args));
            }
            (_, _, KernelIdentity::Cpu(id), KernelBackend::Cpu) => *id == k.inner.id,
            _ => false,
        };
        if !launches {
            return Err(not_launched(CALL, k));
        }
        if config != node.config {
            k.validate_for(CALL, &config)?;
        }
        match (&mut self.backend, node.node.id) {
            (UpdatesBackend::Cpu(exec), NodeId::Cpu(index)) => {
                // The kernel's own device: a graph may span devices (a multi-device step).
                let values = cpu_args::<Sig, A>(CALL, kernel, k.context(), &args)?;
                exec.exec.set_kernel_args(index, values, config)?;
                exec.refresh();
                Ok(())
            }
            _ => Err(mixed(CALL, "node")),
        }
    }
}

/// The call a batch's errors name.
const CALL: &str = "GraphExec::set_kernel_params";

/// The error for a node that launches another kernel.
#[cold]
fn not_launched(call: &'static str, kernel: &Kernel) -> Error {
    Error::invalid(
        call,
        format!("the node does not launch `{}`", kernel.name()),
    )
}

impl std::fmt::Debug for KernelUpdates<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = match self.backend {
            UpdatesBackend::Cuda(_) => "cuda",
            UpdatesBackend::Cpu(..) => "cpu",
        };
        f.debug_struct("KernelUpdates")
            .field("backend", &backend)
            .finish_non_exhaustive()
    }
}
