//! The node methods a graph and a conditional body share, written once as a macro that
//! `mod.rs` expands for [`Graph`](super::Graph) and for [`GraphBody`](super::GraphBody).

/// The node methods a graph and a conditional body share, written once: each takes the
/// receiver's graph and scope.
macro_rules! shared_node_methods {
    ($graph:ident, $scope:expr) => {
        /// Adds a node that does nothing, after `dependencies`: a join point.
        pub fn add_empty_node(&mut self, dependencies: &[GraphNode]) -> Result<GraphNode> {
            let scope = $scope(&*self);
            $graph!(self).add_empty_in(scope, dependencies)
        }

        /// Adds a launch of `kernel` with `args`, after `dependencies`. The graph keeps the
        /// buffers in `args` and the kernel's module alive. On the CPU backend the kernel
        /// needs its CPU implementation.
        pub fn add_kernel_node<Sig: Signature + 'static, A: KernelArgsFor<Sig>>(
            &mut self,
            dependencies: &[GraphNode],
            kernel: &TypedKernel<Sig>,
            config: LaunchConfig,
            args: A,
        ) -> Result<KernelNode> {
            let scope = $scope(&*self);
            $graph!(self).add_kernel_in(scope, dependencies, kernel, config, args)
        }

        /// Adds a copy of pinned host memory to device memory (same lengths).
        pub fn add_copy_htod_node<T: Pod>(
            &mut self,
            dependencies: &[GraphNode],
            src: &impl PinnedSource<T>,
            dst: &mut impl DeviceDest<T>,
        ) -> Result<GraphNode> {
            let scope = $scope(&*self);
            let (s, d) = (
                End::Pinned(src.pinned_region()),
                End::Device(dst.device_region()),
            );
            $graph!(self).add_copy_in(
                "Graph::add_copy_htod_node",
                scope,
                dependencies,
                s,
                d,
                "copy_htod",
            )
        }

        /// Adds a copy of device memory to pinned host memory (same lengths). The host sees
        /// the data once [`PinnedBuffer::as_slice`](crate::PinnedBuffer::as_slice) (which
        /// waits for the launches) returns.
        pub fn add_copy_dtoh_node<T: Pod>(
            &mut self,
            dependencies: &[GraphNode],
            src: &impl DeviceSource<T>,
            dst: &mut impl PinnedDest<T>,
        ) -> Result<GraphNode> {
            let scope = $scope(&*self);
            let (s, d) = (
                End::Device(src.device_region()),
                End::Pinned(dst.pinned_region()),
            );
            $graph!(self).add_copy_in(
                "Graph::add_copy_dtoh_node",
                scope,
                dependencies,
                s,
                d,
                "copy_dtoh",
            )
        }

        /// Adds a copy of device memory to device memory (same lengths).
        pub fn add_copy_dtod_node<T: Pod>(
            &mut self,
            dependencies: &[GraphNode],
            src: &impl DeviceSource<T>,
            dst: &mut impl DeviceDest<T>,
        ) -> Result<GraphNode> {
            let scope = $scope(&*self);
            let (s, d) = (
                End::Device(src.device_region()),
                End::Device(dst.device_region()),
            );
            $graph!(self).add_copy_in(
                "Graph::add_copy_dtod_node",
                scope,
                dependencies,
                s,
                d,
                "copy_dtod",
            )
        }

        /// Adds a memset of every byte of `dst` to `value`.
        pub fn add_memset_u8_node<T: Pod>(
            &mut self,
            dependencies: &[GraphNode],
            dst: &mut impl DeviceDest<T>,
            value: u8,
        ) -> Result<GraphNode> {
            let scope = $scope(&*self);
            let region = dst.device_region();
            $graph!(self).add_memset_in(
                "Graph::add_memset_u8_node",
                scope,
                dependencies,
                region,
                u32::from(value),
                1,
            )
        }

        /// Adds a memset of every 32-bit word of `dst` to `value` (e.g. `1.0f32.to_bits()`);
        /// only for elements whose size is a multiple of 4 bytes.
        pub fn add_memset_u32_node<T: Pod>(
            &mut self,
            dependencies: &[GraphNode],
            dst: &mut impl DeviceDest<T>,
            value: u32,
        ) -> Result<GraphNode> {
            const CALL: &str = "Graph::add_memset_u32_node";
            let scope = $scope(&*self);
            let region = dst.device_region();
            let address = region.ptr().unwrap_or(region.offset as u64);
            args::memset_u32_words(CALL, std::mem::size_of::<T>(), region.bytes, address)?;
            $graph!(self).add_memset_in(CALL, scope, dependencies, region, value, 4)
        }

        /// Makes `to` run after `from` (two nodes of this graph or body). On the CPU backend
        /// `from` must have been added before `to`.
        pub fn add_dependency(&mut self, from: &GraphNode, to: &GraphNode) -> Result<()> {
            let scope = $scope(&*self);
            $graph!(self).add_dependency_in(scope, from, to)
        }

        /// Makes the handle of a conditional node whose condition kernels set themselves
        /// ([`Condition::set_by_kernel`]), for a node of `kind` added to this graph or body
        /// later: pass `&handle` to each kernel node that sets it (a [`SetsCondition`]
        /// parameter; the CUDA kernel calls `gp_set_condition`, see
        /// [`CONDITION_HEADER`](crate::CONDITION_HEADER)). A kernel node before the
        /// conditional node, in this graph or body, sets the first test of a `While` and the
        /// value of a `Decision`; one in the loop's body sets each later test (a `DoWhile`'s
        /// body runs first). A kernel node anywhere else, or beside the conditional node once
        /// that is added, is refused when added. The conditional node must depend on the
        /// kernel nodes before it that set its handle (not checked: a graph's dependencies
        /// are its builder's).
        ///
        /// [`SetsCondition`]: crate::SetsCondition
        pub fn condition_handle(&mut self, kind: HandleKind) -> Result<ConditionHandle> {
            let scope = $scope(&*self);
            $graph!(self).condition_handle_in(scope, kind)
        }

        /// Adds a device-side `while` loop after `dependencies`: `condition` is tested before
        /// each iteration (on the device, by the library's condition kernel; the host takes no
        /// part), and `body` builds what each iteration runs. The loop stops after
        /// `max_iterations` iterations even when the condition still holds, and marks its
        /// [`LoopState`] so that [`GraphExec::check_loops`](crate::GraphExec::check_loops)
        /// reports [`Error::IterationLimit`]: a loop never hangs. CUDA needs a 12.4 or newer
        /// driver ([`Error::Unsupported`] otherwise).
        ///
        /// A graph with a conditional node cannot be cloned or used as a child graph, and
        /// can have one executable graph at a time (CUDA rules, kept on both backends).
        pub fn add_while_node(
            &mut self,
            dependencies: &[GraphNode],
            condition: Condition,
            max_iterations: u32,
            body: impl FnOnce(&mut GraphBody<'_>) -> Result<()>,
        ) -> Result<WhileNode> {
            let scope = $scope(&*self);
            let mut body = Some(body);
            let (node, state) = $graph!(self).add_conditional_in(
                "Graph::add_while_node",
                scope,
                dependencies,
                condition,
                cpu::Form::While,
                1,
                max_iterations,
                &mut |_, b| body.take().map_or(Ok(()), |f| f(b)),
            )?;
            Ok(WhileNode { node, state })
        }

        /// Adds a device-side loop whose body runs before its test (a do-while): `body`
        /// runs, then again while `condition` holds, at most `max_iterations` times in all
        /// (then the loop stops and marks its [`LoopState`], as
        /// [`add_while_node`](Graph::add_while_node)'s does). On CUDA one WHILE node whose
        /// handle starts each launch at 1, with the condition kernel at the end of the body
        /// only; in a body (where an outer loop may reach it again in one launch), a kernel
        /// that sets the handle to 1 before it.
        pub fn add_do_while_node(
            &mut self,
            dependencies: &[GraphNode],
            condition: Condition,
            max_iterations: u32,
            body: impl FnOnce(&mut GraphBody<'_>) -> Result<()>,
        ) -> Result<WhileNode> {
            let scope = $scope(&*self);
            let mut body = Some(body);
            let (node, state) = $graph!(self).add_conditional_in(
                "Graph::add_do_while_node",
                scope,
                dependencies,
                condition,
                cpu::Form::DoWhile,
                1,
                max_iterations,
                &mut |_, b| body.take().map_or(Ok(()), |f| f(b)),
            )?;
            Ok(WhileNode { node, state })
        }

        /// Adds a device-side loop whose body swaps buffers (a ping-pong), unrolled by two:
        /// `body(0, ..)` builds the body as written, `body(1, ..)` the body with the buffers
        /// exchanged, and the two alternate, `condition` tested before each (and counted
        /// against `max_iterations` each, as [`add_while_node`](Graph::add_while_node)'s
        /// iterations are); `body(2, ..)` runs once after the loop when it ran an odd number
        /// of iterations (e.g. a copy that puts the result back under its first name), unless
        /// it stopped at its maximum (then it runs nothing after). With
        /// `first_test` false the first iteration runs before any test (a do-while).
        ///
        /// On CUDA: `K0 -> WHILE(body 0 -> K -> IF(body 1) -> K) -> K -> IF(body 2)`, the
        /// library's condition kernel deciding each test (a comparison or a value; not a
        /// kernel-set condition). The node returned is the last IF: later nodes follow it.
        pub fn add_ping_pong_while_node(
            &mut self,
            dependencies: &[GraphNode],
            condition: Condition,
            first_test: bool,
            max_iterations: u32,
            mut body: impl FnMut(usize, &mut GraphBody<'_>) -> Result<()>,
        ) -> Result<WhileNode> {
            let scope = $scope(&*self);
            let (node, state) = $graph!(self).add_ping_pong_in(
                "Graph::add_ping_pong_while_node",
                scope,
                dependencies,
                condition,
                first_test,
                max_iterations,
                &mut body,
            )?;
            Ok(WhileNode { node, state })
        }

        /// Adds a device-side `if` after `dependencies`: `body` runs once when `condition`
        /// holds (tested on the device), not at all otherwise. Same rules as
        /// [`Graph::add_while_node`].
        pub fn add_if_node(
            &mut self,
            dependencies: &[GraphNode],
            condition: Condition,
            body: impl FnOnce(&mut GraphBody<'_>) -> Result<()>,
        ) -> Result<GraphNode> {
            let scope = $scope(&*self);
            let mut body = Some(body);
            let (node, _) = $graph!(self).add_conditional_in(
                "Graph::add_if_node",
                scope,
                dependencies,
                condition,
                cpu::Form::If,
                1,
                u32::MAX,
                &mut |_, b| body.take().map_or(Ok(()), |f| f(b)),
            )?;
            Ok(node)
        }

        /// Adds a device-side `if`/`else` after `dependencies`: `then` runs when `condition`
        /// holds, `otherwise` when it does not. On a CUDA 12.8 or newer driver one IF node
        /// with two bodies; before, two IF nodes (on the condition and on its negation, both
        /// decided before either body runs), and the node returned is the second.
        pub fn add_if_else_node(
            &mut self,
            dependencies: &[GraphNode],
            condition: Condition,
            then: impl FnOnce(&mut GraphBody<'_>) -> Result<()>,
            otherwise: impl FnOnce(&mut GraphBody<'_>) -> Result<()>,
        ) -> Result<GraphNode> {
            let scope = $scope(&*self);
            let (mut then, mut otherwise) = (Some(then), Some(otherwise));
            let (node, _) = $graph!(self).add_conditional_in(
                "Graph::add_if_else_node",
                scope,
                dependencies,
                condition,
                cpu::Form::IfElse,
                2,
                u32::MAX,
                &mut |n, b| {
                    let f: Option<Box<dyn FnOnce(&mut GraphBody<'_>) -> Result<()> + '_>> =
                        if n == 0 {
                            then.take().map(|f| Box::new(f) as Box<_>)
                        } else {
                            otherwise.take().map(|f| Box::new(f) as Box<_>)
                        };
                    f.map_or(Ok(()), |f| f(b))
                },
            )?;
            Ok(node)
        }

        /// Adds a device-side switch after `dependencies`: body `n` (built by `body(n, ..)`,
        /// for `n` in `0..cases`) runs when `condition`'s value is `n`
        /// ([`Condition::value`]; a comparison's value is 1 or 0), none when the value is
        /// `cases` or more, as CUDA's SWITCH node does. On a CUDA 12.8 or newer driver one
        /// SWITCH node; before, one IF node per case (all decided before any body runs), and
        /// the node returned is the last.
        pub fn add_switch_node(
            &mut self,
            dependencies: &[GraphNode],
            condition: Condition,
            cases: usize,
            mut body: impl FnMut(usize, &mut GraphBody<'_>) -> Result<()>,
        ) -> Result<GraphNode> {
            let scope = $scope(&*self);
            let (node, _) = $graph!(self).add_conditional_in(
                "Graph::add_switch_node",
                scope,
                dependencies,
                condition,
                cpu::Form::Switch,
                cases,
                u32::MAX,
                &mut body,
            )?;
            Ok(node)
        }

        /// The number of edges between the nodes of this graph or body (edges inside
        /// conditional bodies and child graphs are theirs): on CUDA `cuGraphGetEdges`.
        pub fn edge_count(&self) -> Result<usize> {
            let scope = $scope(self);
            $graph!(self).edge_count_in(scope)
        }
    };
}

macro_rules! graph_itself {
    ($s:ident) => {
        $s
    };
}

macro_rules! body_graph {
    ($s:ident) => {
        $s.graph
    };
}

pub(super) use {body_graph, graph_itself, shared_node_methods};
