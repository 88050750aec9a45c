//! Kernel nodes: the checks every backend shares, then one path per backend. A generated
//! step adds one per launch, so the CUDA path goes straight to the backend's node add, with
//! the scope and the dependencies resolved in one pass each.

use super::*;

/// The call a kernel node's errors name.
const CALL: &str = "Graph::add_kernel_node";

impl Graph {
    pub(super) fn add_kernel_in<Sig: Signature + 'static, A: KernelArgsFor<Sig>>(
        &mut self,
        scope: u32,
        dependencies: &[GraphNode],
        kernel: &TypedKernel<Sig>,
        config: LaunchConfig,
        args: A,
    ) -> Result<KernelNode> {
        // A node whose arguments break a bound of the kernel is refused, not added.
        kernel.check_bounds_for(CALL, &args)?;
        let states = self.condition_states(CALL, scope, &args)?;
        let k = kernel.kernel();
        k.validate_for(CALL, &config)?;
        if !k.context().shares_memory_with(&self.ctx) {
            return Err(Error::mismatch(
                CALL,
                format!(
                    "`{}` is loaded in another context than the graph's",
                    k.name()
                ),
            ));
        }
        let (node, identity) = match &k.inner.backend {
            KernelBackend::Cuda(function) => {
                let args = CudaArgsOf(&args);
                let node = self.add_cuda_kernel(scope, dependencies, function, &config, &args)?;
                if let (Some(states), GraphBackend::Cuda(g)) = (states, &mut self.backend) {
                    g.retain(states);
                }
                (node, KernelIdentity::Cuda(function.id()))
            }
            KernelBackend::Cpu => {
                let node = self.add_cpu_kernel(scope, dependencies, kernel, config, &args)?;
                (node, KernelIdentity::Cpu(k.inner.id))
            }
        };
        Ok(KernelNode {
            node,
            kernel: identity,
            config,
        })
    }

    /// Checks that the kernel may set each condition handle among `args` here, and collects
    /// the loop state words it may write: kept for the graph's life even if the handle and
    /// its node go before it (the words themselves are argument memory). `None` when there
    /// are none (most launches), so nothing is allocated or kept.
    fn condition_states<Sig: Signature, A: KernelArgsFor<Sig>>(
        &self,
        call: &'static str,
        scope: u32,
        args: &A,
    ) -> Result<Option<Vec<cuda::Keep>>> {
        let mut refused = None;
        let mut states: Option<Vec<cuda::Keep>> = None;
        args.visit_conditions(&mut |handle| {
            if refused.is_none() {
                refused = handle.check_setter(call, self.id, scope).err();
            }
            if let Some(FlagStorage::Cuda(word)) = handle.loop_state().map(LoopState::storage) {
                states
                    .get_or_insert_default()
                    .push(cuda::Keep::Object(word.clone()));
            }
        });
        match refused {
            Some(e) => Err(e),
            None => Ok(states),
        }
    }

    /// A launch of `function` added to `scope` after `dependencies`, which reach the backend
    /// in one pass, with no list made.
    fn add_cuda_kernel(
        &mut self,
        scope: u32,
        dependencies: &[GraphNode],
        function: &cuda::Function,
        config: &LaunchConfig,
        args: &impl cuda::CudaArgs,
    ) -> Result<GraphNode> {
        let body = match self.scope_ref(CALL, scope)? {
            Scope::Cuda(body) => *body,
            Scope::Cpu(_) => return Err(mixed(CALL, "kernel")),
        };
        let GraphBackend::Cuda(g) = &mut self.backend else {
            return Err(mixed(CALL, "kernel"));
        };
        let (id, mut stranger) = (self.id, false);
        let nodes = dependencies.iter().map(|n| match n.id {
            NodeId::Cuda(node) if n.graph == id && n.scope == scope => node,
            // Refused below, before anything is kept; the backend refuses a node of no graph.
            _ => {
                stranger = true;
                cuda::NodeRef::NONE
            }
        });
        let added = g.add_kernel_node(body, nodes, function, config, args);
        if stranger {
            return Err(Error::invalid(CALL, FOREIGN_DEPENDENCY));
        }
        Ok(self.made(scope, GraphNodeType::KERNEL, NodeId::Cuda(added?)))
    }

    fn add_cpu_kernel<Sig: Signature + 'static, A: KernelArgsFor<Sig>>(
        &mut self,
        scope: u32,
        dependencies: &[GraphNode],
        kernel: &TypedKernel<Sig>,
        config: LaunchConfig,
        args: &A,
    ) -> Result<GraphNode> {
        let k = kernel.kernel();
        let ctx = self.ctx.clone();
        self.add_with(
            CALL,
            scope,
            dependencies,
            GraphNodeType::KERNEL,
            |_, _, _| Err(Error::cuda_only(CALL)),
            |g, path, deps| {
                let cpu_impl = kernel
                    .cpu_impl()
                    .ok_or_else(|| cpu::missing_cpu_impl(CALL, k.name(), k.module_name()))?;
                let values = cpu_args::<Sig, A>(CALL, kernel, &ctx, args)?;
                let label = format!("launch {}::{}", k.module_name(), k.name());
                // A node the builder adds is the step's own launch, never a called function's.
                let tag = cpu::KernelTag {
                    kernel: k.inner.id,
                    config,
                    in_call: false,
                };
                let op = cpu::Op::kernel(label, cpu_impl.kernel_fn(), values, tag)
                    .keep(k.module_keep_cpu());
                Ok(g.add_op(path, op, deps)?)
            },
        )
    }
}
